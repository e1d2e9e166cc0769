// raytrace.cpp: a ray tracer (spheres on a checkered plane, one point light, shadows, two
// reflection bounces, ss x ss samples per pixel). Bandwidth-bound: a job is a rectangle of the
// screen; it splits its longer side in two until it is at most tile x tile pixels, and its result is
// its rectangle's RGB bytes, so image segments travel back up the tree. Every pixel is computed by
// the same function from its coordinates alone: the image equals the sequential render byte for byte.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "satin_apps.hpp"

namespace iccs::satin {

namespace {

struct Args {
    uint32_t x0, y0, w, h, W, H, tile, ss;
};
static_assert(sizeof(Args) == 32);

struct V {
    double x, y, z;
};
V operator+(V a, V b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
V operator-(V a, V b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
V operator*(V a, double s) { return {a.x * s, a.y * s, a.z * s}; }
double dot(V a, V b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
V norm(V a) { return a * (1.0 / std::sqrt(dot(a, a))); }

struct Sphere {
    V c;
    double r;
    V color;
    double refl;
};
constexpr Sphere kSpheres[] = {
    {{0, 1, -6}, 1.0, {0.9, 0.2, 0.2}, 0.3},   {{-2.2, 0.7, -7}, 0.7, {0.2, 0.8, 0.3}, 0.2},
    {{2.1, 0.8, -5.5}, 0.8, {0.2, 0.3, 0.9}, 0.5}, {{-0.8, 0.35, -4.2}, 0.35, {0.9, 0.9, 0.2}, 0.1},
    {{1.0, 2.6, -8.5}, 1.2, {0.8, 0.8, 0.8}, 0.6}, {{-3.5, 2.0, -10}, 1.5, {0.6, 0.3, 0.7}, 0.25},
};
constexpr V kLight{-4, 8, 0};

// Nearest hit along o + t d (t > 1e-6): -1 = the plane y = 0, -2 = nothing.
int hit(V o, V d, double& t) {
    int best = -2;
    t = 1e30;
    for (int i = 0; i < static_cast<int>(std::size(kSpheres)); ++i) {
        const V oc = o - kSpheres[i].c;
        const double b = dot(oc, d), c = dot(oc, oc) - kSpheres[i].r * kSpheres[i].r, disc = b * b - c;
        if (disc < 0) continue;
        const double s = std::sqrt(disc);
        double x = -b - s;
        if (x < 1e-6) x = -b + s;
        if (x > 1e-6 && x < t) {
            t = x;
            best = i;
        }
    }
    if (d.y < -1e-9) {
        const double x = -o.y / d.y;
        if (x > 1e-6 && x < t) {
            t = x;
            best = -1;
        }
    }
    return best;
}

V trace(V o, V d, int depth) {
    double t = 0;
    const int k = hit(o, d, t);
    if (k == -2) return V{0.5, 0.7, 1.0} * (0.5 + 0.5 * d.y);  // sky
    const V p = o + d * t;
    V n, color;
    double refl = 0;
    if (k == -1) {
        n = {0, 1, 0};
        const bool odd = (static_cast<long>(std::floor(p.x)) + static_cast<long>(std::floor(p.z))) & 1;
        color = odd ? V{0.9, 0.9, 0.9} : V{0.15, 0.15, 0.15};
        refl = 0.15;
    } else {
        n = norm(p - kSpheres[k].c);
        color = kSpheres[k].color;
        refl = kSpheres[k].refl;
    }
    const V l = norm(kLight - p);
    double diffuse = std::max(0.0, dot(n, l));
    double ts = 0;
    const V po = p + n * 1e-4;
    if (diffuse > 0 && hit(po, l, ts) != -2 && ts * ts < dot(kLight - p, kLight - p)) diffuse = 0;  // shadow
    const V h = norm(l - d);
    const double spec = diffuse > 0 ? std::pow(std::max(0.0, dot(n, h)), 40) : 0;
    V c = color * (0.12 + 0.88 * diffuse) + V{1, 1, 1} * (0.4 * spec);
    if (depth < 2 && refl > 0) {
        const V r = d - n * (2 * dot(d, n));
        c = c * (1 - refl) + trace(po, norm(r), depth + 1) * refl;
    }
    return c;
}

uint8_t channel(double v) { return static_cast<uint8_t>(std::lround(std::clamp(v, 0.0, 1.0) * 255.0)); }

void pixel(uint32_t x, uint32_t y, uint32_t W, uint32_t H, uint32_t ss, uint8_t* out) {
    V sum{0, 0, 0};
    const double aspect = double(W) / double(H);
    for (uint32_t sy = 0; sy < ss; ++sy)
        for (uint32_t sx = 0; sx < ss; ++sx) {
            const double u = ((x + (sx + 0.5) / ss) / W * 2 - 1) * aspect * 0.6;
            const double v = (1 - (y + (sy + 0.5) / ss) / H * 2) * 0.6;
            sum = sum + trace(V{0, 1.2, 0}, norm(V{u, v - 0.1, -1}), 0);
        }
    sum = sum * (1.0 / (ss * ss));
    out[0] = channel(sum.x);
    out[1] = channel(sum.y);
    out[2] = channel(sum.z);
}

void render(const Args& a, std::vector<uint8_t>& out) {
    out.resize(size_t{3} * a.w * a.h);
    for (uint32_t y = 0; y < a.h; ++y)
        for (uint32_t x = 0; x < a.w; ++x) pixel(a.x0 + x, a.y0 + y, a.W, a.H, a.ss, &out[3 * (size_t{y} * a.w + x)]);
}

bool valid(const Args& a) {
    return a.W > 0 && a.H > 0 && a.W <= 8192 && a.H <= 8192 && a.w <= a.W && a.h <= a.H && a.x0 <= a.W - a.w &&
           a.y0 <= a.H - a.h && a.tile > 0 && a.ss > 0 && a.ss <= 8;
}

void job(group::Worker& w, std::span<const uint8_t> args, std::vector<uint8_t>& result) {
    Args a;
    if (!read_one(args, a) || !valid(a)) return;
    if (a.w <= a.tile && a.h <= a.tile) return render(a, result);
    Args p = a, q = a;
    const bool split_x = a.w >= a.h;
    if (split_x) {
        p.w = a.w / 2;
        q.x0 = a.x0 + p.w;
        q.w = a.w - p.w;
    } else {
        p.h = a.h / 2;
        q.y0 = a.y0 + p.h;
        q.h = a.h - p.h;
    }
    w.spawn(kRaytrace, std::span(reinterpret_cast<const uint8_t*>(&p), sizeof p));
    w.spawn(kRaytrace, std::span(reinterpret_cast<const uint8_t*>(&q), sizeof q));
    if (!w.sync()) return;
    const std::vector<uint8_t>&rp = w.result(0), &rq = w.result(1);
    if (rp.size() != size_t{3} * p.w * p.h || rq.size() != size_t{3} * q.w * q.h) return;
    result.resize(size_t{3} * a.w * a.h);
    for (uint32_t y = 0; y < a.h; ++y) {
        uint8_t* row = &result[size_t{3} * y * a.w];
        if (split_x) {
            std::copy_n(&rp[size_t{3} * y * p.w], size_t{3} * p.w, row);
            std::copy_n(&rq[size_t{3} * y * q.w], size_t{3} * q.w, row + size_t{3} * p.w);
        } else {
            const auto& src = y < p.h ? rp : rq;
            const uint32_t yy = y < p.h ? y : y - p.h;
            std::copy_n(&src[size_t{3} * yy * a.w], size_t{3} * a.w, row);
        }
    }
}

Args root(bool paper) { return paper ? Args{0, 0, 640, 640, 640, 640, 16, 4} : Args{0, 0, 256, 256, 256, 256, 16, 3}; }

std::vector<uint8_t> root_args(bool paper, uint64_t) {
    return bytes_of(root(paper));
}

std::vector<uint8_t> sequential(std::span<const uint8_t> args) {
    Args a;
    if (!read_one(args, a) || !valid(a)) return {};
    std::vector<uint8_t> out;
    render(a, out);
    return out;
}

std::string describe(std::span<const uint8_t> r) {
    uint64_t sum = 0;  // a checksum for the log (the check compares every byte)
    for (uint8_t b : r) sum = sum * 131 + b;
    char s[96];
    std::snprintf(s, sizeof s, "image of %zu bytes, checksum %016llx", r.size(), static_cast<unsigned long long>(sum));
    return s;
}

std::string problem(bool paper) {
    const Args a = root(paper);
    return std::to_string(a.W) + "x" + std::to_string(a.H) + " pixels, " + std::to_string(a.ss * a.ss) +
           " samples per pixel, tiles of at most " + std::to_string(a.tile) + "x" + std::to_string(a.tile);
}

}  // namespace

bool write_ppm(const std::string& path, std::span<const uint8_t> root_args, std::span<const uint8_t> pixels,
               std::string& err) {
    Args a;
    if (!read_one(root_args, a) || pixels.size() != size_t{3} * a.w * a.h) {
        err = "no image to write (" + std::to_string(pixels.size()) + " bytes)";
        return false;
    }
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
        err = "cannot write " + path;
        return false;
    }
    std::fprintf(f, "P6\n%u %u\n255\n", a.w, a.h);
    const bool ok = std::fwrite(pixels.data(), 1, pixels.size(), f) == pixels.size();
    if (std::fclose(f) != 0 || !ok) {
        err = "writing " + path + " failed";
        return false;
    }
    return true;
}

App raytrace_app() {
    return App{"raytrace", kRaytrace, job,
               "ray tracer: the screen split down to tiles, image segments sent back (bandwidth-bound)", root_args,
               sequential, describe, problem};
}

}  // namespace iccs::satin
