// satin_apps.hpp: the four divide-and-conquer programs of the Satin case study, each a job kind of
// group/steal.hpp plus its sequential reference (the same arithmetic in the same order, so the
// parallel result must equal it byte for byte).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "steal.hpp"

namespace iccs::satin {

// Job kinds (the same table in every cluster process).
enum Kind : uint16_t { kIntegrate = 0, kNqueens = 1, kRaytrace = 2, kTsp = 3, kKinds = 4 };
std::vector<group::JobFn> job_kinds();

// One program: its root job, the sequential reference and how to describe a result.
struct App {
    const char* name;  // as `iccs run` knows it
    Kind kind;
    group::JobFn job;
    const char* what;  // one line: what it computes and what its messages carry
    std::vector<uint8_t> (*root_args)(bool paper, uint64_t seed);
    std::vector<uint8_t> (*sequential)(std::span<const uint8_t> root_args);
    std::string (*describe)(std::span<const uint8_t> result);  // "14200 solutions"
    std::string (*problem)(bool paper);                        // "n = 12, spawning 3 rows deep"
};

// nullptr when `name` is not one of them.
const App* find_app(const std::string& name);
const std::vector<App>& apps();

// The ray tracer's image as binary PPM (P6), for --image.
bool write_ppm(const std::string& path, std::span<const uint8_t> root_args, std::span<const uint8_t> pixels,
               std::string& err);

// Descriptors of each program (each in its own file).
App integrate_app();
App nqueens_app();
App raytrace_app();
App tsp_app();

// Little helpers for argument and result bytes.
template <class T>
void put(std::vector<uint8_t>& b, const T& v) {
    const size_t o = b.size();
    b.resize(o + sizeof v);
    std::memcpy(b.data() + o, &v, sizeof v);
}
template <class T>
bool get(std::span<const uint8_t> b, size_t& off, T& v) {
    if (off + sizeof v > b.size()) return false;
    std::memcpy(&v, b.data() + off, sizeof v);
    off += sizeof v;
    return true;
}

// A value's bytes (a result, root arguments), and one value read from the start of `b`.
template <class T>
std::vector<uint8_t> bytes_of(const T& v) {
    std::vector<uint8_t> b;
    put(b, v);
    return b;
}
template <class T>
bool read_one(std::span<const uint8_t> b, T& v) {
    size_t off = 0;
    return get(b, off, v);
}

}  // namespace iccs::satin
