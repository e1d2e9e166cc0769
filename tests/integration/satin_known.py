"""satin_known.py: answers for the Satin programs computed here, not by the programs (whose
sequential reference shares its kernel with the parallel run): n-queens from the literature (OEIS
A000170), the integral from its closed form, the TSP optimum by Held-Karp on the instance rebuilt
from its seed, and the ray tracer's pixels by a tracer of the same scene written here. Used by
satin_run.py. (tests/unit/satin_known.hpp holds the first three for the unit tests.)
"""
import math
import re

QUEENS = {12: 14200, 13: 73712, 14: 365596, 15: 2279184, 16: 14772512}  # OEIS A000170
SIZES = {  # the programs' problem sizes (apps/satin/*.cpp): test, paper
    "nqueens": {"test": 14, "paper": 15},
    "integrate": {"test": 400.0, "paper": 4000.0},
    "satin-tsp": {"test": 13, "paper": 15},
    "raytrace": {"test": (256, 3), "paper": (640, 4)},  # width = height, samples per side
}


def integral(b):
    """The integral over [0, b] of e^(-x/100) sum_{k=1..24} sin(0.37 k x) / k + 1.5."""
    c, s = 0.01, 1.5 * b
    for k in range(1, 25):
        w = 0.37 * k
        s += (w - math.exp(-c * b) * (c * math.sin(w * b) + w * math.cos(w * b))) / (c * c + w * w) / k
    return s


def tsp_instance(n, seed):
    """satin-tsp's cities: a 64-bit LCG (Knuth's MMIX constants) from seed * 2654435761 + 12345,
    x then y per city in [0, 1000), distances the rounded Euclidean ones."""
    m = 1 << 64
    s = (seed * 2654435761 + 12345) % m

    def rnd():
        nonlocal s
        s = (s * 6364136223846793005 + 1442695040888963407) % m
        return (s >> 11) / 9007199254740992.0

    pts = []
    for _ in range(n):
        x = rnd() * 1000
        y = rnd() * 1000
        pts.append((x, y))
    return [[math.floor(math.hypot(a[0] - b[0], a[1] - b[1]) + 0.5) for b in pts] for a in pts]


def held_karp(d):
    """The shortest closed tour through every city of the distance table d."""
    n = len(d)
    m = n - 1
    inf = float("inf")
    best = [[inf] * m for _ in range(1 << m)]
    for j in range(m):
        best[1 << j][j] = d[0][j + 1]
    for s in range(1, 1 << m):
        row = best[s]
        for j in range(m):
            here = row[j]
            if here == inf or not s >> j & 1:
                continue
            dj = d[j + 1]
            for k in range(m):
                if s >> k & 1:
                    continue
                v = here + dj[k + 1]
                nxt = best[s | 1 << k]
                if v < nxt[k]:
                    nxt[k] = v
    full = best[(1 << m) - 1]
    return min(full[j] + d[j + 1][0] for j in range(m))


# --- the ray tracer's scene (apps/satin/raytrace.cpp), traced here ------------------------------
SPHERES = [((0, 1, -6), 1.0, (0.9, 0.2, 0.2), 0.3), ((-2.2, 0.7, -7), 0.7, (0.2, 0.8, 0.3), 0.2),
           ((2.1, 0.8, -5.5), 0.8, (0.2, 0.3, 0.9), 0.5), ((-0.8, 0.35, -4.2), 0.35, (0.9, 0.9, 0.2), 0.1),
           ((1.0, 2.6, -8.5), 1.2, (0.8, 0.8, 0.8), 0.6), ((-3.5, 2.0, -10), 1.5, (0.6, 0.3, 0.7), 0.25)]
LIGHT = (-4.0, 8.0, 0.0)


def _unit(v):
    n = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    return (v[0] / n, v[1] / n, v[2] / n)


def _nearest(o, d):
    """(t, what): what is a sphere index, 'plane' (y = 0) or None."""
    best_t, what = 1e30, None
    for i, (c, r, _, _) in enumerate(SPHERES):
        oc = (o[0] - c[0], o[1] - c[1], o[2] - c[2])
        b = oc[0] * d[0] + oc[1] * d[1] + oc[2] * d[2]
        disc = b * b - (oc[0] * oc[0] + oc[1] * oc[1] + oc[2] * oc[2] - r * r)
        if disc < 0:
            continue
        t = -b - math.sqrt(disc)
        if t < 1e-6:
            t = -b + math.sqrt(disc)
        if 1e-6 < t < best_t:
            best_t, what = t, i
    if d[1] < -1e-9:
        t = -o[1] / d[1]
        if 1e-6 < t < best_t:
            best_t, what = t, "plane"
    return best_t, what


def _trace(o, d, depth):
    t, what = _nearest(o, d)
    if what is None:
        k = 0.5 + 0.5 * d[1]
        return (0.5 * k, 0.7 * k, 1.0 * k)
    p = (o[0] + d[0] * t, o[1] + d[1] * t, o[2] + d[2] * t)
    if what == "plane":
        n = (0.0, 1.0, 0.0)
        color = (0.9,) * 3 if (math.floor(p[0]) + math.floor(p[2])) % 2 else (0.15,) * 3
        refl = 0.15
    else:
        c, _, color, refl = SPHERES[what]
        n = _unit((p[0] - c[0], p[1] - c[1], p[2] - c[2]))
    to_light = (LIGHT[0] - p[0], LIGHT[1] - p[1], LIGHT[2] - p[2])
    ld = _unit(to_light)
    diffuse = max(0.0, n[0] * ld[0] + n[1] * ld[1] + n[2] * ld[2])
    po = (p[0] + n[0] * 1e-4, p[1] + n[1] * 1e-4, p[2] + n[2] * 1e-4)
    if diffuse > 0:
        ts, blocker = _nearest(po, ld)
        if blocker is not None and ts * ts < sum(x * x for x in to_light):
            diffuse = 0.0  # in shadow
    spec = 0.0
    if diffuse > 0:
        h = _unit((ld[0] - d[0], ld[1] - d[1], ld[2] - d[2]))
        spec = max(0.0, n[0] * h[0] + n[1] * h[1] + n[2] * h[2]) ** 40
    out = [color[i] * (0.12 + 0.88 * diffuse) + 0.4 * spec for i in range(3)]
    if depth < 2 and refl > 0:
        dn = d[0] * n[0] + d[1] * n[1] + d[2] * n[2]
        r = _unit((d[0] - 2 * dn * n[0], d[1] - 2 * dn * n[1], d[2] - 2 * dn * n[2]))
        back = _trace(po, r, depth + 1)
        out = [out[i] * (1 - refl) + back[i] * refl for i in range(3)]
    return out


def pixel(x, y, w, h, ss):
    """The pixel's RGB bytes: ss x ss samples from the camera at (0, 1.2, 0) looking down -z."""
    acc = [0.0, 0.0, 0.0]
    aspect = w / h
    for sy in range(ss):
        for sx in range(ss):
            u = ((x + (sx + 0.5) / ss) / w * 2 - 1) * aspect * 0.6
            v = (1 - (y + (sy + 0.5) / ss) / h * 2) * 0.6
            c = _trace((0.0, 1.2, 0.0), _unit((u, v - 0.1, -1.0)), 0)
            for i in range(3):
                acc[i] += c[i]
    return [int(math.floor(min(1.0, max(0.0, a / (ss * ss))) * 255.0 + 0.5)) for a in acc]


def read_ppm(path):
    with open(path, "rb") as f:
        data = f.read()
    m = re.match(rb"P6\s+(\d+)\s+(\d+)\s+255\s", data)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), data[m.end():]


_cache = {}


def check(app, size, seed, stderr, image=None):
    """(ok, what): the run's answer (its 'parallel: ...' line, or the image file) against the one
    computed here."""
    m = re.search(r"^  parallel: (.*) in [\d.]+ s;", stderr, re.M)
    if not m:
        return False, "no 'parallel:' line in the run's report"
    said = m.group(1)
    if app == "nqueens":
        n = SIZES[app][size]
        return said == f"{QUEENS[n]} solutions", f"{n} queens: {said}, known {QUEENS[n]} (OEIS A000170)"
    if app == "integrate":
        b = SIZES[app][size]
        got = re.fullmatch(r"integral (\S+)", said)
        exact = integral(b)
        ok = got is not None and abs(float(got.group(1)) - exact) < 1e-6 * max(1.0, abs(exact))
        return ok, f"{said} over [0, {b:g}], closed form {exact!r}"
    if app == "satin-tsp":
        n = SIZES[app][size]
        key = ("tsp", n, seed)
        if key not in _cache:
            _cache[key] = held_karp(tsp_instance(n, seed))
        return said == f"shortest tour {_cache[key]}", f"{n} cities (seed {seed}): {said}, Held-Karp {_cache[key]}"
    if app == "raytrace":
        side, ss = SIZES[app][size]
        img = read_ppm(image) if image else None
        if img is None or img[:2] != (side, side) or len(img[2]) != 3 * side * side:
            return False, f"no {side}x{side} image written ({image})"
        px = img[2]
        # every 9th pixel of every 9th row (odd steps, so the checkered floor is sampled at both colors)
        samples = [(x, y) for y in range(4, side, 9) for x in range(2, side, 9)]
        key = ("ray", size)
        if key not in _cache:
            _cache[key] = [pixel(x, y, side, side, ss) for x, y in samples]
        off = 0
        worst = []
        for (x, y), want in zip(samples, _cache[key]):
            got = px[3 * (y * side + x):3 * (y * side + x) + 3]
            diff = max(abs(a - b) for a, b in zip(got, want))
            if diff > 2:  # rounding apart; a sample on an edge may differ more (counted, bounded)
                off += 1
                worst.append((diff, x, y, list(got), want))
        worst.sort(reverse=True)
        ok = off <= len(samples) // 100
        return ok, (f"{len(samples)} sampled pixels traced here: {len(samples) - off} within 2 levels per channel, "
                    f"{off} apart (at most {len(samples) // 100} allowed){'; worst ' + str(worst[:3]) if worst else ''}")
    return False, f"no known answer for {app}"
