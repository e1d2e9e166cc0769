// cluster.cpp: see cluster.hpp.
#include "cluster.hpp"
#include "wan_script.hpp"

#include <pthread.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_telemetry.h>
#include <sched.h>
#include <signal.h>
#include <execinfo.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <bit>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "conv_hdr.hpp"
#include "stamps.hpp"
#include "slidwin_hdr.hpp"
#include "dpdk_env.hpp"
#include "owner_only.hpp"

namespace iccs {

namespace {

std::atomic<bool> g_stop{false};  // SIGTERM/SIGINT in a cluster process: stop cleanly
constexpr uint16_t kAppPort = 1000;  // the built-in programs: thread t listens on kAppPort + t

void pin_self(unsigned cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// The message (src cluster, src thread) -> (dst cluster, dst thread) number i: its size and bytes
// follow from these numbers, so the receiver can check it without any table. Message 0 has the
// smallest size and message 1 the largest, so every run covers both ends of the range.
uint32_t msg_size(const ClusterPlan& p, uint32_t src_c, uint32_t src_t, uint32_t dst_c, uint32_t dst_t, uint64_t i) {
    if (i == 0) return p.min_size;
    if (i == 1) return p.max_size;
    std::mt19937_64 g(p.seed ^ (uint64_t{src_c} << 48) ^ (uint64_t{src_t} << 40) ^ (uint64_t{dst_c} << 32) ^
                      (uint64_t{dst_t} << 24) ^ (i * 0x9e3779b97f4a7c15ull));
    return p.min_size + static_cast<uint32_t>(g() % (uint64_t{p.max_size} - p.min_size + 1));
}
inline uint8_t msg_byte(uint32_t src_c, uint32_t src_t, uint64_t i, uint32_t k) {
    return static_cast<uint8_t>(k * 31 + i * 7 + src_c * 13 + src_t * 5);
}

bool stopping() { return g_stop.load(std::memory_order_relaxed); }

// Connect, retrying while the server is not listening yet (it starts at its own pace).
ConvError connect_retry(Convergence& conv, Endpoint to, Connection*& out, const ClusterPlan& p) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(p.link_timeout_ms);
    while (true) {
        const ConvError e = conv.connect(to, out);
        if (e != ConvError::kRefused || stopping() || std::chrono::steady_clock::now() > until) return e;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

bool set_error(ComputeEnv& env, const std::string& what, ConvError e) {
    env.result.error = what + ": " + conv_strerror(e) + " (" + env.conv.last_error() + ")";
    return false;
}

// alltoall: every compute thread opens a parallel connection to every compute thread of every
// other cluster (port kAppPort + thread) and sends `messages` messages over it; every receiver
// checks each message (size and bytes from its number = its conn_seq), exactly once, and in order
// on ordered connections; then each side closes (flushing) and the receiver sees end-of-stream.
bool program_alltoall(ComputeEnv& env) {
    const ClusterPlan& p = env.plan;
    Convergence& conv = env.conv;
    const uint16_t me = p.cluster_id, t = env.thread;
    if (const ConvError e = conv.listen(static_cast<uint16_t>(kAppPort + t)); e != ConvError::kOk)
        return set_error(env, "listen", e);
    struct Out {
        Connection* c;
        uint16_t dc, dt;
        uint64_t next = 0;
    };
    struct In {
        Connection* c;
        uint64_t got = 0;
        std::vector<uint8_t> seen;
        bool eos = false;
    };
    std::vector<Out> outs;
    std::vector<In> ins;
    for (uint16_t dc = 0; dc < p.clusters; ++dc) {
        if (dc == me) continue;
        for (uint16_t dt = 0; dt < p.threads; ++dt) {
            Connection* c = nullptr;
            if (const ConvError e = connect_retry(conv, Endpoint{dc, static_cast<uint16_t>(kAppPort + dt)}, c, p);
                e != ConvError::kOk)
                return set_error(env, "connect to cluster " + std::to_string(dc) + " thread " + std::to_string(dt), e);
            outs.push_back(Out{c, dc, dt});
        }
    }
    // --gap-us: the connections are open; the proxies idle this long, then the burst (tests of
    // wake on arrival, issue 21).
    if (p.gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(p.gap_us));
    const size_t expect_in = size_t{p.clusters - 1u} * p.threads;
    std::vector<uint8_t> buf(p.max_size);
    std::vector<PollItem> items;
    auto check = [&](In& in, const RecvMsg& m) {
        const uint64_t id = m.conn_seq();
        // the sender's thread: its ephemeral port tells nothing, so the message's number and the
        // remote cluster are checked against every thread of that cluster
        const uint16_t sc = in.c->remote().cluster;
        bool ok = id < p.messages;
        if (ok && p.conv.ordered && id != in.got) ok = false;  // ordered: exactly the next one
        if (ok && in.seen[id]) {
            ++env.result.duplicates;
            return;
        }
        uint16_t st = UINT16_MAX;
        if (ok) {
            const uint32_t len = m.copy_to(buf.data(), static_cast<uint32_t>(buf.size()));
            for (uint16_t cand = 0; cand < p.threads && st == UINT16_MAX; ++cand) {
                if (len != m.size() || len != msg_size(p, sc, cand, me, t, id)) continue;
                bool same = true;
                for (uint32_t k = 0; k < len && same; ++k) same = buf[k] == msg_byte(sc, cand, id, k);
                if (same) st = cand;
            }
            ok = st != UINT16_MAX;
        }
        if (!ok) {
            ++env.result.corrupt;
            return;
        }
        in.seen[id] = 1;
        ++in.got;
        ++env.result.received;
    };
    uint64_t sends_done = 0;
    const uint64_t to_send = outs.size() * p.messages;
    auto all_in = [&] {
        if (ins.size() < expect_in) return false;
        for (const In& in : ins)
            if (in.got < p.messages) return false;
        return true;
    };
    std::vector<uint8_t> pattern(p.max_size);
    while (!stopping() && (sends_done < to_send || !all_in())) {
        items.clear();
        if (ins.size() < expect_in) items.push_back(PollItem{nullptr, static_cast<uint16_t>(kAppPort + t), PollItem::kAcceptable});
        for (Out& o : outs)
            if (o.next < p.messages) items.push_back(PollItem{o.c, 0, PollItem::kWritable});
        for (In& in : ins)
            if (in.got < p.messages) items.push_back(PollItem{in.c, 0, PollItem::kReadable});
        if (conv.poll(items, 1'000'000) == 0) continue;
        for (const PollItem& it : items) {
            if (it.revents & PollItem::kError) {
                const ConvError e = conv.send(it.conn, nullptr, 0, 0);
                return set_error(env, "connection to cluster " + std::to_string(it.conn->remote().cluster), e);
            }
            if (it.revents & PollItem::kAcceptable) {
                Connection* c = nullptr;
                while (ins.size() < expect_in && conv.accept(it.listen_port, c, 0) == ConvError::kOk)
                    ins.push_back(In{c, 0, std::vector<uint8_t>(p.messages, 0)});
            } else if (it.revents & PollItem::kWritable) {
                Out& o = *std::find_if(outs.begin(), outs.end(), [&](const Out& x) { return x.c == it.conn; });
                for (int k = 0; k < 32 && o.next < p.messages; ++k) {
                    const uint32_t size = msg_size(p, me, t, o.dc, o.dt, o.next);
                    for (uint32_t b = 0; b < size; ++b) pattern[b] = msg_byte(me, t, o.next, b);
                    const ConvError e = conv.send(o.c, pattern.data(), size, 0);
                    if (e == ConvError::kWouldBlock) break;
                    if (e != ConvError::kOk) return set_error(env, "send", e);
                    ++o.next;
                    ++sends_done;
                    ++env.result.sent;
                }
            } else if (it.revents & PollItem::kReadable) {
                In& in = *std::find_if(ins.begin(), ins.end(), [&](const In& x) { return x.c == it.conn; });
                RecvMsg m;
                for (int k = 0; k < 64 && in.got < p.messages; ++k) {
                    const ConvError e = conv.recv_msg(in.c, m, 0);
                    if (e == ConvError::kWouldBlock) break;
                    if (e != ConvError::kOk) return set_error(env, "recv", e);
                    check(in, m);
                }
            }
        }
    }
    if (stopping()) return false;
    // Close what we sent on (flush: wait until the peer took it all), then see end-of-stream on
    // what we received.
    for (Out& o : outs) {
        uint64_t unsent = 0;
        if (const ConvError e = conv.close(o.c, 60'000'000, &unsent); e != ConvError::kOk)
            return set_error(env, "close", e);
        if (unsent != 0) {
            env.result.error = "close reported " + std::to_string(unsent) + " messages the peer never took";
            return false;
        }
    }
    for (In& in : ins) {
        RecvMsg m;
        const ConvError e = conv.recv_msg(in.c, m, 60'000'000);
        if (e != ConvError::kEndOfStream) return set_error(env, "recv after the peer closed (want end-of-stream)", e);
        conv.close(in.c, 0);
    }
    return true;
}

// pingpong (`iccs bench rtt`): thread 0 of cluster 0 sends `messages` messages of min_size bytes
// to thread 0 of cluster 1, which sends each straight back; round-trip times (after `warmup`
// untimed rounds) go to result_file.
bool program_pingpong(ComputeEnv& env) {
    const ClusterPlan& p = env.plan;
    Convergence& conv = env.conv;
    if (env.thread != 0 || p.cluster_id > 1) return true;
    const bool pinger = p.cluster_id == 0;
    Connection* c = nullptr;
    if (pinger) {
        if (const ConvError e = connect_retry(conv, Endpoint{1, kAppPort}, c, p); e != ConvError::kOk)
            return set_error(env, "connect", e);
    } else {
        if (const ConvError e = conv.listen(kAppPort); e != ConvError::kOk) return set_error(env, "listen", e);
        if (const ConvError e = conv.accept(kAppPort, c, 60'000'000); e != ConvError::kOk)
            return set_error(env, "accept", e);
    }
    // ICCS_PINGPONG_SIZES=S1,S2,... (the latency experiment, perf/experiments): round i sends
    // S[i mod n] bytes instead of --min-size, so all sizes meet the same state of a shared host;
    // the result file then has a line per size too: "rtt_ns_size SIZE MEDIAN P99 MIN MAX N".
    std::vector<uint32_t> sizes;
    if (const char* sz = std::getenv("ICCS_PINGPONG_SIZES"); sz != nullptr && *sz != '\0') {
        for (const char* q = sz; *q != '\0';) {
            char* end = nullptr;
            const unsigned long v = std::strtoul(q, &end, 10);
            if (end == q || v > (16u << 20)) {
                env.result.error = std::string("ICCS_PINGPONG_SIZES=") + sz + ": expected sizes 0..16777216 separated by ','";
                return false;
            }
            sizes.push_back(static_cast<uint32_t>(v));
            q = *end == ',' ? end + 1 : end;
            if (*end != ',' && *end != '\0') {
                env.result.error = std::string("ICCS_PINGPONG_SIZES=") + sz + ": expected sizes 0..16777216 separated by ','";
                return false;
            }
        }
    }
    uint32_t biggest = std::max<uint32_t>(p.min_size, 1);
    for (const uint32_t v : sizes) biggest = std::max(biggest, v);
    std::vector<uint8_t> buf(biggest, 0x5a);
    std::vector<uint64_t> rtt;
    rtt.reserve(p.messages);
    std::vector<std::vector<uint64_t>> rtt_by_size(sizes.size());
    const uint64_t rounds = p.warmup + p.messages;
    // ICCS_STAMPS=PREFIX (the breakdown experiment): every round's stage stamps of the ping
    // (stack/stamps.hpp) go to PREFIX.c<cluster>, one line per round: the round and 13 times [ns].
    const char* stamp_prefix = std::getenv("ICCS_STAMPS");
    std::vector<std::array<uint64_t, stamps::kPoints>> stamp_rows;
    if (stamp_prefix != nullptr && *stamp_prefix != '\0') {
        stamps::set_on(true);
        stamp_rows.reserve(rounds);
    }
    for (uint64_t i = 0; i < rounds && !stopping(); ++i) {
        if (pinger && p.gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(p.gap_us));
        if (pinger) stamps::arm();
        const uint64_t t0 = now_ns();
        const uint32_t size = sizes.empty() ? p.min_size : sizes[i % sizes.size()];
        if (pinger) {
            if (const ConvError e = conv.send(c, buf.data(), size); e != ConvError::kOk)
                return set_error(env, "send", e);
            ++env.result.sent;
        }
        uint32_t len = 0;
        if (const ConvError e = conv.recv(c, buf.data(), static_cast<uint32_t>(buf.size()), len, 60'000'000);
            e != ConvError::kOk)
            return set_error(env, "recv", e);
        ++env.result.received;
        if (stamps::g_on.load(std::memory_order_relaxed)) {  // the pinger: its ping's send side is complete;
            uint64_t row[stamps::kPoints];                    // the ponger: the ping's receive side
            stamps::read(row);
            stamp_rows.emplace_back();
            std::copy(std::begin(row), std::end(row), stamp_rows.back().begin());
        }
        if (pinger) {
            if (i >= p.warmup) {
                rtt.push_back(now_ns() - t0);
                if (!sizes.empty()) rtt_by_size[i % sizes.size()].push_back(rtt.back());
            }
        } else {
            if (const ConvError e = conv.send(c, buf.data(), len); e != ConvError::kOk) return set_error(env, "send", e);
            ++env.result.sent;
        }
    }
    if (pinger && !p.result_file.empty() && !rtt.empty()) {
        std::sort(rtt.begin(), rtt.end());
        if (FILE* f = std::fopen(p.result_file.c_str(), "w")) {
            std::fprintf(f, "rtt_ns %llu %llu %llu %llu %zu\n", static_cast<unsigned long long>(rtt[rtt.size() / 2]),
                         static_cast<unsigned long long>(rtt[std::min(rtt.size() - 1, rtt.size() * 99 / 100)]),
                         static_cast<unsigned long long>(rtt.front()), static_cast<unsigned long long>(rtt.back()),
                         rtt.size());
            for (size_t k = 0; k < sizes.size(); ++k) {
                std::vector<uint64_t>& v = rtt_by_size[k];
                if (v.empty()) continue;
                std::sort(v.begin(), v.end());
                std::fprintf(f, "rtt_ns_size %u %llu %llu %llu %llu %zu\n", sizes[k],
                             static_cast<unsigned long long>(v[v.size() / 2]),
                             static_cast<unsigned long long>(v[std::min(v.size() - 1, v.size() * 99 / 100)]),
                             static_cast<unsigned long long>(v.front()), static_cast<unsigned long long>(v.back()),
                             v.size());
            }
            std::fclose(f);
        }
    }
    if (!stamp_rows.empty()) {
        const std::string path = std::string(stamp_prefix) + ".c" + std::to_string(p.cluster_id);
        FILE* f = std::fopen(path.c_str(), "w");
        if (f == nullptr) {
            env.result.error = "cannot write the stamps file " + path + ": " + std::strerror(errno);
            return false;
        }
        std::fprintf(f, "# round");
        for (const char* n : stamps::kPointNames) std::fprintf(f, " %s", n);
        std::fprintf(f, "\n");
        for (size_t r = 0; r < stamp_rows.size(); ++r) {
            std::fprintf(f, "%zu", r);
            for (const uint64_t t : stamp_rows[r]) std::fprintf(f, " %llu", static_cast<unsigned long long>(t));
            std::fprintf(f, "\n");
        }
        std::fclose(f);
    }
    conv.close(c, 5'000'000);
    return true;
}

// errors: the failure cases a user meets, each checked (2 clusters, thread 0 of each):
//  1. connect to a port nobody bound: refused, with a message, within the time-out;
//  2. recv after the peer closed: end-of-stream; send after it closed: closed;
//  3. a cluster that dies (cluster 1 kills itself) is reported to its peer as down.
bool program_errors(ComputeEnv& env) {
    const ClusterPlan& p = env.plan;
    Convergence& conv = env.conv;
    if (env.thread != 0 || p.cluster_id > 1) return true;
    auto say = [&](const std::string& s) {
        std::printf("cluster %u: %s\n", p.cluster_id, s.c_str());
        std::fflush(stdout);
    };
    if (p.cluster_id == 1) {
        conv.listen(kAppPort);
        Connection* c = nullptr;
        if (const ConvError e = conv.accept(kAppPort, c, 60'000'000); e != ConvError::kOk) return set_error(env, "accept", e);
        uint8_t b[16];
        uint32_t len = 0;
        if (const ConvError e = conv.recv(c, b, sizeof b, len, 60'000'000); e != ConvError::kOk) return set_error(env, "recv", e);
        conv.send(c, "bye", 3);
        conv.close(c, 10'000'000);
        // part 3: a second connection, then this cluster dies without a word
        if (const ConvError e = conv.accept(kAppPort, c, 60'000'000); e != ConvError::kOk) return set_error(env, "accept", e);
        if (const ConvError e = conv.recv(c, b, sizeof b, len, 60'000'000); e != ConvError::kOk) return set_error(env, "recv", e);
        say("dies now (SIGKILL), with a connection open");
        raise(SIGKILL);
    }
    // 1. nobody bound port 9 of cluster 1
    Connection* c = nullptr;
    uint8_t b[16];
    uint32_t len = 0;
    auto t0 = std::chrono::steady_clock::now();
    ConvError e = conv.connect(Endpoint{1, 9}, c, {}, 5'000'000);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (e != ConvError::kRefused) return set_error(env, "connect to a port nobody bound (want refused)", e);
    say("check 1 ok: connect to cluster 1 port 9: " + std::string(conv_strerror(e)) + " after " +
        std::to_string(static_cast<int>(ms)) + " ms: " + conv.last_error());
    ++env.result.received;
    // 2. end-of-stream; first a recv with a time-out from the peer, silent until our "hi": it
    // times out, not before its time (the wait's own clock: convergence.cpp wait_some) and not
    // much after (2 s of slack for a loaded host)
    if (e = connect_retry(conv, Endpoint{1, kAppPort}, c, p); e != ConvError::kOk) return set_error(env, "connect", e);
    t0 = std::chrono::steady_clock::now();
    e = conv.recv(c, b, sizeof b, len, 50'000);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (e != ConvError::kTimeout) return set_error(env, "recv with a 50 ms time-out from a silent peer (want timed out)", e);
    if (ms < 50.0 || ms > 2050.0) {
        env.result.error = "recv with a 50 ms time-out returned after " + std::to_string(ms) + " ms";
        return false;
    }
    say("check 2a ok: recv with a 50 ms time-out: " + std::string(conv_strerror(e)) + " after " +
        std::to_string(static_cast<int>(ms)) + " ms: " + conv.last_error());
    conv.send(c, "hi", 2);
    if (e = conv.recv(c, b, sizeof b, len, 10'000'000); e != ConvError::kOk) return set_error(env, "recv", e);
    e = conv.recv(c, b, sizeof b, len, 10'000'000);
    if (e != ConvError::kEndOfStream) return set_error(env, "recv after the peer closed (want end-of-stream)", e);
    const ConvError e2 = conv.send(c, "x", 1, 0);
    if (e2 != ConvError::kClosed) return set_error(env, "send after the peer closed (want closed)", e2);
    say("check 2 ok: recv after the peer closed: " + std::string(conv_strerror(e)) + "; send: " + conv_strerror(e2));
    conv.close(c, 0);
    ++env.result.received;
    // 3. the peer dies: recv must end with peer-down within the peer time-out (plus slack)
    if (e = connect_retry(conv, Endpoint{1, kAppPort}, c, p); e != ConvError::kOk) return set_error(env, "connect", e);
    if (e = conv.send(c, "go", 2); e != ConvError::kOk) return set_error(env, "send", e);
    t0 = std::chrono::steady_clock::now();
    e = conv.recv(c, b, sizeof b, len, int64_t{p.peer_timeout_ms} * 1000 + 20'000'000);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (e != ConvError::kPeerDown) return set_error(env, "recv from a cluster that died (want peer down)", e);
    say("check 3 ok: recv from the dead cluster: " + std::string(conv_strerror(e)) + " after " +
        std::to_string(static_cast<int>(ms)) + " ms: " + conv.last_error());
    conv.close(c, 0);
    ++env.result.received;
    return true;
}

// The one-way stream of `iccs bench compare`: thread 0 of cluster 0 sends `messages` messages of
// min_size bytes to thread 0 of cluster 1 over one parallel connection as fast as the window takes
// them; cluster 1 answers the last one. The sender times its first send to that answer (one
// one-way trip over the whole stream) and writes "stream_ns ELAPSED MESSAGES" to result_file.
bool program_stream(ComputeEnv& env) {
    const ClusterPlan& p = env.plan;
    Convergence& conv = env.conv;
    if (env.thread != 0 || p.cluster_id > 1) return true;
    std::vector<uint8_t> buf(std::max<uint32_t>(p.min_size, 1), 0x5a);
    Connection* c = nullptr;
    if (p.cluster_id == 1) {
        if (const ConvError e = conv.listen(kAppPort); e != ConvError::kOk) return set_error(env, "listen", e);
        if (const ConvError e = conv.accept(kAppPort, c, 60'000'000); e != ConvError::kOk)
            return set_error(env, "accept", e);
        RecvMsg m;
        for (uint64_t i = 0; i < p.messages; ++i) {
            if (const ConvError e = conv.recv_msg(c, m, 60'000'000); e != ConvError::kOk) return set_error(env, "recv", e);
            ++env.result.received;
        }
        if (const ConvError e = conv.send(c, buf.data(), 1); e != ConvError::kOk) return set_error(env, "send", e);
        ++env.result.sent;
        conv.recv_msg(c, m, 10'000'000);  // end-of-stream
        conv.close(c, 0);
        return true;
    }
    if (const ConvError e = connect_retry(conv, Endpoint{1, kAppPort}, c, p); e != ConvError::kOk)
        return set_error(env, "connect", e);
    const uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < p.messages && !stopping(); ++i) {
        if (const ConvError e = conv.send(c, buf.data(), p.min_size); e != ConvError::kOk) return set_error(env, "send", e);
        ++env.result.sent;
    }
    uint32_t len = 0;
    if (const ConvError e = conv.recv(c, buf.data(), static_cast<uint32_t>(buf.size()), len, 60'000'000);
        e != ConvError::kOk)
        return set_error(env, "recv of the answer", e);
    ++env.result.received;
    const uint64_t elapsed = now_ns() - t0;
    if (!p.result_file.empty())
        if (FILE* f = std::fopen(p.result_file.c_str(), "w")) {
            std::fprintf(f, "stream_ns %llu %llu\n", static_cast<unsigned long long>(elapsed),
                         static_cast<unsigned long long>(p.messages));
            std::fclose(f);
        }
    conv.close(c, 10'000'000);
    return true;
}

int proxy_lcore_main(void* arg) {
    static_cast<Proxy*>(arg)->run();
    return 0;
}

// ---- telemetry: /iccs/proxies and /iccs/proxy/stats,<n> (DESIGN.md §6)
std::vector<std::unique_ptr<Proxy>>* g_proxies = nullptr;
std::mutex g_proxies_mu;  // telemetry callbacks run on DPDK's control thread, teardown on main

int tel_proxies(const char*, const char*, rte_tel_data* d) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    if (g_proxies != nullptr)
        for (size_t i = 0; i < g_proxies->size(); ++i) rte_tel_data_add_array_int(d, static_cast<int>(i));
    return 0;
}

int tel_proxy_stats(const char*, const char* params, rte_tel_data* d) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    if (g_proxies == nullptr || params == nullptr) return -1;
    char* end = nullptr;
    const long n = std::strtol(params, &end, 10);
    if (end == params || n < 0 || static_cast<size_t>(n) >= g_proxies->size()) return -1;
    const Proxy& px = *(*g_proxies)[static_cast<size_t>(n)];
    const ProxySnapshot s = px.snapshot();
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "cluster", px.config().cluster);
    rte_tel_data_add_dict_u64(d, "proxy", px.config().index);
    auto add = [d](const char* name, const char*, uint64_t v) { rte_tel_data_add_dict_u64(d, name, v); };
    s.proxy.for_each(add);
    s.slidwin.for_each(add);
    s.stack.for_each(add);
    // message time (DESIGN.md §6): mean, quantile bounds, and the log2 histogram's non-empty buckets
    rte_tel_data_add_dict_u64(d, "msg_time_mean_ns",
                              s.proxy.msg_time_count ? s.proxy.msg_time_sum_ns / s.proxy.msg_time_count : 0);
    rte_tel_data_add_dict_u64(d, "msg_time_p50_below_ns", msg_time_quantile_ns(s.proxy, 0.50));
    rte_tel_data_add_dict_u64(d, "msg_time_p99_below_ns", msg_time_quantile_ns(s.proxy, 0.99));
    for (uint32_t b = 0; b < kMsgTimeBuckets; ++b)
        if (s.proxy.msg_time_hist[b] != 0)
            rte_tel_data_add_dict_u64(d, ("msg_time_hist_lt_" + std::to_string(uint64_t{2} << b) + "_ns").c_str(),
                                      s.proxy.msg_time_hist[b]);
    rte_tel_data_add_dict_u64(d, "port_rx_frames", s.port_rx);
    rte_tel_data_add_dict_u64(d, "port_tx_frames", s.port_tx);
    rte_tel_data_add_dict_u64(d, "port_tx_ring_full", s.port_tx_ring_full);
    if (s.kernel_udp) {  // fabric udp: the io_uring socket's own counters
        s.uring.for_each([d](const char* name, const char*, uint64_t v) {
            rte_tel_data_add_dict_u64(d, ("uring_" + std::string(name)).c_str(), v);
        });
    }
    return 0;
}

// ---- telemetry: /iccs/wan/links,<n>, /iccs/wan/set, /iccs/wan/mode (proxy/wan_emu.hpp)
// links: a flat dict (DPDK 22.11 names are [A-Za-z0-9_/], dict containers hold arrays only):
// mode, hold counters, link_<A>_<B>_<counter> per link this proxy emulates (bw_bytes_per_s,
// lat_ns, present, msgs, bytes, queue_ns_sum, queue_ns_mean, queue_ns_max, changes, loss_ppm:
// the loss probability in parts per million, dropped: frames lost), and the
// recent changes as parallel arrays change_at_us, change_a, change_b, change_bw, change_lat_ns.
int tel_wan_links(const char*, const char* params, rte_tel_data* d) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    if (g_proxies == nullptr || params == nullptr) return -1;
    char* end = nullptr;
    const long n = std::strtol(params, &end, 10);
    if (end == params || n < 0 || static_cast<size_t>(n) >= g_proxies->size()) return -1;
    const WanView v = (*g_proxies)[static_cast<size_t>(n)]->wan_view();
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_string(d, "mode", v.on ? to_string(v.mode) : "off");
    if (!v.on) return 0;
    rte_tel_data_add_dict_u64(d, "site", v.my_site);
    rte_tel_data_add_dict_u64(d, "sites", v.sites);
    rte_tel_data_add_dict_u64(d, "held_msgs", v.held_msgs);
    rte_tel_data_add_dict_u64(d, "held_bytes", v.held_bytes);
    rte_tel_data_add_dict_u64(d, "held_max_msgs", v.held_max_msgs);
    rte_tel_data_add_dict_u64(d, "hold_full", v.hold_full);
    rte_tel_data_add_dict_u64(d, "released", v.released);
    size_t entries = 7;
    for (const WanView::Link& l : v.links) {
        if (entries + 11 > RTE_TEL_MAX_DICT_ENTRIES - 8) break;  // the dict's limit (the change arrays follow)
        entries += 11;
        const std::string k = "link_" + std::to_string(l.a) + "_" + std::to_string(l.b) + "_";
        const WanLinkCounters& c = l.counters;
        rte_tel_data_add_dict_u64(d, (k + "bw_bytes_per_s").c_str(), static_cast<uint64_t>(l.params.bw_bytes_per_s));
        rte_tel_data_add_dict_u64(d, (k + "lat_ns").c_str(), l.params.latency_ns);
        rte_tel_data_add_dict_u64(d, (k + "present").c_str(), l.params.present ? 1 : 0);
        rte_tel_data_add_dict_u64(d, (k + "msgs").c_str(), c.msgs);
        rte_tel_data_add_dict_u64(d, (k + "bytes").c_str(), c.bytes);
        rte_tel_data_add_dict_u64(d, (k + "queue_ns_sum").c_str(), c.queue_ns_sum);
        rte_tel_data_add_dict_u64(d, (k + "queue_ns_mean").c_str(), c.msgs ? c.queue_ns_sum / c.msgs : 0);
        rte_tel_data_add_dict_u64(d, (k + "queue_ns_max").c_str(), c.queue_ns_max);
        rte_tel_data_add_dict_u64(d, (k + "changes").c_str(), c.changes);
        rte_tel_data_add_dict_u64(d, (k + "loss_ppm").c_str(), static_cast<uint64_t>(std::llround(l.params.loss * 1e6)));
        rte_tel_data_add_dict_u64(d, (k + "dropped").c_str(), c.dropped);
    }
    const char* names[] = {"change_at_us", "change_a", "change_b", "change_bw", "change_lat_ns"};
    for (int f = 0; f < 5; ++f) {
        rte_tel_data* arr = rte_tel_data_alloc();
        if (arr == nullptr) return -1;
        rte_tel_data_start_array(arr, RTE_TEL_U64_VAL);
        for (const WanChange& ch : v.changes) {
            const uint64_t x = f == 0   ? ch.at_ns / 1000
                               : f == 1 ? ch.a
                               : f == 2 ? ch.b
                               : f == 3 ? static_cast<uint64_t>(ch.params.bw_bytes_per_s)
                                        : ch.params.latency_ns;
            rte_tel_data_add_array_u64(arr, x);
        }
        rte_tel_data_add_dict_container(d, names[f], arr, 0);
    }
    return 0;
}

// {"result": "ok"} or {"result": "error: ..."} (a telemetry string holds at most 127 characters).
void add_result(rte_tel_data* d, const std::string& err) {
    std::string r = err.empty() ? std::string("ok") : "error: " + err;
    if (r.size() >= RTE_TEL_MAX_STRING_LEN) r.resize(RTE_TEL_MAX_STRING_LEN - 1);
    rte_tel_data_add_dict_string(d, "result", r.c_str());
}

// /iccs/wan/set and /iccs/wan/loss: "A,B,VALUES...[,sym]" changes link A -> B (and B -> A with
// sym) on every proxy of this cluster; `parse` reads the values (after A and B) into `c`.
int tel_wan_link_change(const char* params, rte_tel_data* d, WanCommand c,
                        bool (*parse)(const std::string&, uint32_t, WanCommand&, std::string&)) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    if (g_proxies == nullptr || g_proxies->empty() || params == nullptr) return -1;
    std::string args(params);
    bool sym = false;
    if (args.size() > 4 && args.compare(args.size() - 4, 4, ",sym") == 0) {
        sym = true;
        args.resize(args.size() - 4);
    }
    for (char& ch : args)
        if (ch == ',') ch = ' ';
    rte_tel_data_start_dict(d);
    const WanView v = (*g_proxies)[0]->wan_view();
    std::string err;
    if (!v.on) {
        err = "the WAN stage is off in this run (start it with a [wan] key)";
    } else if (parse(args, v.sites, c, err)) {
        for (auto& px : *g_proxies) {
            px->wan_post(c);
            if (sym) {
                WanCommand r = c;
                std::swap(r.a, r.b);
                px->wan_post(r);
            }
        }
    }
    add_result(d, err);
    return 0;
}

// /iccs/wan/set,A,B,BW,LAT_S[,sym]: bandwidth and latency of a link.
int tel_wan_set(const char*, const char* params, rte_tel_data* d) {
    return tel_wan_link_change(params, d, WanCommand{}, [](const std::string& a, uint32_t sites, WanCommand& c,
                                                            std::string& err) {
        return wan_parse_link_values(a, sites, c.a, c.b, c.params, err);
    });
}

// /iccs/wan/loss,A,B,P[,sym]: the link loses frames with probability P.
int tel_wan_loss(const char*, const char* params, rte_tel_data* d) {
    WanCommand c;
    c.kind = WanCommand::kLoss;
    return tel_wan_link_change(params, d, c, [](const std::string& a, uint32_t sites, WanCommand& cmd,
                                                 std::string& err) {
        return wan_parse_loss_values(a, sites, cmd.a, cmd.b, cmd.params.loss, err);
    });
}

// /iccs/wan/mode,constant|script|series|live
int tel_wan_mode(const char*, const char* params, rte_tel_data* d) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    if (g_proxies == nullptr || g_proxies->empty() || params == nullptr) return -1;
    const std::string m(params);
    WanCommand c;
    c.kind = WanCommand::kMode;
    std::string err;
    if (m == "constant") c.mode = WanMode::kConstant;
    else if (m == "script") c.mode = WanMode::kScript;
    else if (m == "series") c.mode = WanMode::kSeries;
    else if (m == "live") c.mode = WanMode::kLive;
    else err = "mode '" + m + "': allowed values are constant, script, series, live";
    const WanConfig* wc = nullptr;
    if (err.empty()) {
        if (!(*g_proxies)[0]->config().wan) err = "the WAN stage is off in this run";
        else wc = (*g_proxies)[0]->config().wan.get();
    }
    if (err.empty() && ((c.mode == WanMode::kScript && wc->script.empty()) ||
                        (c.mode == WanMode::kSeries && wc->series.empty())))
        err = "no [wan] " + m + " was given to this run";
    if (err.empty())
        for (auto& px : *g_proxies) px->wan_post(c);
    rte_tel_data_start_dict(d);
    add_result(d, err);
    return 0;
}

}  // namespace

Ipv4Addr proxy_ip(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return Ipv4Addr{plan.base_ip + uint32_t{cluster} * 256 + proxy + 1};
}

MacAddr proxy_mac(uint16_t cluster, uint16_t proxy) {
    return MacAddr{{0x02, 0x00, 0x0a, 0x00, static_cast<uint8_t>(cluster), static_cast<uint8_t>(proxy)}};
}

std::string pci_address(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    // One entry per proxy of every cluster (all clusters on this host), or per proxy of one
    // cluster (one cluster per host): the configuration checks the count.
    const size_t all = size_t{plan.clusters} * plan.proxies_per_cluster[cluster];
    const size_t i = plan.pci_addresses.size() >= all ? size_t{cluster} * plan.proxies_per_cluster[cluster] + proxy : proxy;
    return i < plan.pci_addresses.size() ? plan.pci_addresses[i] : std::string();
}

Ipv4Addr udp_ip(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return udp_socket_ip(plan.udp_addresses, plan.clusters, plan.proxies_per_cluster[cluster], cluster, proxy);
}

uint16_t udp_port(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return udp_socket_port(plan.udp_port, cluster, proxy);
}

std::string afp_ifname(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    // IFNAMSIZ is 16: "ic" + run + "c" + cluster + "p" + proxy stays within it for pids < 10^7
    return "ic" + plan.run_id + "c" + std::to_string(cluster) + "p" + std::to_string(proxy);
}

std::string eal_prefix(const ClusterPlan& plan, uint16_t cluster) {
    return "iccs-" + plan.run_id + "-c" + std::to_string(cluster);
}

static std::string link_socket(const ClusterPlan& plan, uint16_t c1, uint16_t p1, uint16_t c2, uint16_t p2) {
    if (c2 < c1 || (c2 == c1 && p2 < p1)) {
        std::swap(c1, c2);
        std::swap(p1, p2);
    }
    return plan.sock_dir + "/memif-" + std::to_string(c1) + "." + std::to_string(p1) + "-" + std::to_string(c2) +
           "." + std::to_string(p2) + ".sock";
}

ClusterReport run_cluster(const ClusterPlan& plan) {
    ClusterReport rep;
    const uint16_t me = plan.cluster_id;
    const uint16_t nprox = plan.proxies_per_cluster[me];
    const std::string prefix = eal_prefix(plan, me);
    signal(SIGTERM, [](int) { g_stop.store(true); });
    signal(SIGINT, [](int) { g_stop.store(true); });

    EalOptions eo;
    eo.file_prefix = prefix;
    // lcore 0: the main thread; lcores 1..P: the proxies, each on its configured core.
    eo.lcore_cpus.push_back(plan.compute_cores.empty()
                                ? 0
                                : plan.compute_cores[(me * plan.threads) % plan.compute_cores.size()]);
    if (plan.polling != Polling::kInline)
        for (uint16_t p = 0; p < nprox; ++p) eo.lcore_cpus.push_back(plan.proxy_cores[p]);
    const uint32_t links_per_proxy = [&] {
        uint32_t n = 0;
        for (uint16_t c = 0; c < plan.clusters; ++c) n += c == me ? 0 : plan.proxies_per_cluster[c];
        return n;
    }();
    // RX mbufs a proxy can have outstanding at once, each frame one mbuf: every sub-connection's
    // receive buffer full of the largest datagrams, the reassembly cap, the compute threads'
    // rings full, and a burst per port. Fewer and the receive buffers can starve the port of
    // mbufs, so the missing datagram that would drain them can never arrive.
    // The largest datagram is one piece: convergence cuts larger messages at the stripe threshold.
    // Fabric udp: counted in the 2 KiB segments a received datagram is copied into (the kernel
    // reassembles: no fragments, no reassembly cap).
    const uint32_t threshold = plan.conv.stripe_threshold_bytes ? plan.conv.stripe_threshold_bytes
                                                                : default_stripe_threshold(plan.mtu_bytes);
    const uint32_t largest = std::min(plan.max_size, threshold);
    const bool kernel_udp = plan.fabric == "udp";
    // DPDK fabrics: frames of a datagram, each in ceil((mtu + 14) / 2048) mbufs (a 9000-byte
    // frame takes 5: counting frames alone starved the port at MTU 9000).
    const uint32_t mbufs_per_frame = (plan.mtu_bytes + 14 + 2047) / 2048;
    const uint32_t frags_per_msg =
        kernel_udp ? (largest + kConvHdrLen + kSlidwinHdrLen + kDgramAddrLen) / 2048 + 1
                   : ((largest + kConvHdrLen + kSlidwinHdrLen + 8) / (plan.mtu_bytes - 28) + 1) * mbufs_per_frame;
    // Compute threads that run the proxies' iterations (inline polling, the assist) register with
    // the EAL (below): each may then park up to 1.5 caches (DPDK's flush threshold) of every RX
    // pool in its lcore cache.
    const bool assisting = plan.polling == Polling::kAdaptive && plan.assist;
    const bool threads_register = plan.polling == Polling::kInline || assisting;
    constexpr uint32_t kPoolCache = 256;  // lcore cache of the mbuf pools below
    constexpr uint32_t kLcoreCacheMax = kPoolCache * 3 / 2;
    const uint32_t rx_mbufs = (threads_register ? plan.threads * kLcoreCacheMax : 0) +
                              links_per_proxy * plan.slidwin.rcv_buf_datagrams * frags_per_msg +
                              (kernel_udp ? 0 : plan.reass.max_bytes / 2048) +
                              plan.threads * (plan.ring_entries + plan.conv.zero_copy_packets) * frags_per_msg +
                              1024 * (links_per_proxy + 1) +
                              (plan.wan ? static_cast<uint32_t>(plan.wan->hold_limit_bytes / 2048) : 0);
    constexpr uint32_t kStackSegs = 16384, kStackSegBytes = 512;  // acks, fragment headers, copies
    // -m: the pools above plus a quarter for DPDK's own overhead (mempool headers, caches, rings).
    const uint64_t pools_mb = 64 + uint64_t{plan.pool_segments} * 2432 / (1 << 20) +
                              nprox * (uint64_t{rx_mbufs} * 2560 / (1 << 20) +
                                       uint64_t{kStackSegs} * (kStackSegBytes + 384) / (1 << 20) + 16);
    eo.memory_mb = static_cast<uint32_t>(pools_mb + pools_mb / 4);
    if (plan.fabric == "pci")
        for (uint16_t p = 0; p < nprox; ++p) eo.pci_allow.push_back(pci_address(plan, me, p));
    std::string err;
    if (!eal_start(eo, err)) {
        rep.error = err;
        return rep;
    }
    const auto t_start = std::chrono::steady_clock::now();
    {
        auto pool = MempoolPktPool::create(prefix + "-msg", plan.pool_segments, 2048 + kPktHeadroom, err);
        ClusterRings rings;
        std::vector<std::unique_ptr<MempoolPktPool>> stack_pools;  // one per proxy: never starved by compute threads
        std::vector<std::unique_ptr<Proxy>> proxies;
        std::vector<rte_mempool*> mempools;
        auto fail = [&](const std::string& e) {
            rep.error = e;
            return false;
        };
        auto setup = [&]() -> bool {
            if (!pool) return fail(err);
            if (!rings.create("c" + std::to_string(me), plan.threads, nprox, plan.ring_entries, plan.clusters, err)) return fail(err);
            // Issue 17: this incarnation of the cluster is known to its peers by a token drawn now
            // (every slidwin header carries it; each sub-connection also draws a random ISN).
            const uint64_t run_token = random_u64();
            for (uint16_t p = 0; p < nprox; ++p) {
                ProxyConfig pc;
                pc.cluster = me;
                pc.index = p;
                pc.threads = plan.threads;
                pc.stack.mac = proxy_mac(me, p);
                pc.stack.ip = proxy_ip(plan, me, p);
                pc.stack.mtu_bytes = plan.mtu_bytes;
                pc.stack.reass = plan.reass;
                pc.slidwin = plan.slidwin;
                pc.slidwin.run_token = run_token;
                pc.auth = plan.auth;
                pc.udp_port = plan.udp_port;
                pc.polling = plan.polling;
                pc.combine_max_bytes = plan.combine_max_bytes;
                pc.impair = plan.impair;
                if (plan.wan) {
                    auto wan = std::make_shared<WanConfig>(*plan.wan);
                    wan->proxies_per_cluster = plan.proxies_per_cluster;
                    wan->loss_seed = plan.wan->loss_seed * 1000003u + p;  // each proxy its own loss draws
                    pc.wan = std::move(wan);
                }
                pc.peer_timeout_ms = plan.peer_timeout_ms;
                pc.proxies_per_cluster = plan.proxies_per_cluster;
                for (uint16_t c = 0; c < plan.clusters; ++c)
                    if (c != me)
                        for (uint16_t q = 0; q < plan.proxies_per_cluster[c]; ++q)
                            pc.peers.push_back(kernel_udp ? ProxyAddr{c, q, udp_ip(plan, c, q), proxy_mac(c, q),
                                                                      udp_port(plan, c, q)}
                                                          : ProxyAddr{c, q, proxy_ip(plan, c, q), proxy_mac(c, q)});
                const std::string pn = "c" + std::to_string(me) + "p" + std::to_string(p);
                // The proxy's own buffers (acks, fragment headers): if it drew from the pool the
                // compute threads fill, two clusters could each wait for the other's acks forever.
                stack_pools.push_back(MempoolPktPool::create(prefix + "-" + pn + "stk", kStackSegs,
                                                             kStackSegBytes + kPktHeadroom, err));
                if (!stack_pools.back()) return fail(err);
                auto px = std::make_unique<Proxy>(pc, *stack_pools.back(), rings);
                if (kernel_udp) {
                    // The kernel does IP and UDP: no port, no mbufs. Received datagrams are copied
                    // into a pool of the proxy's own, sized as the RX mbufs would be.
                    stack_pools.push_back(MempoolPktPool::create(prefix + "-" + pn + "urx", rx_mbufs,
                                                                 2048 + kPktHeadroom, err));
                    if (!stack_pools.back()) return fail(err);
                    UringUdpConfig uc;
                    uc.ip = udp_ip(plan, me, p);
                    uc.port = udp_port(plan, me, p);
                    uc.sqpoll = plan.udp_sqpoll;
                    if (!px->add_udp_socket(uc, *stack_pools.back(), err))
                        return fail("proxy " + std::to_string(me) + "." + std::to_string(p) + ": " + err);
                    proxies.push_back(std::move(px));
                    continue;
                }
                rte_mempool* rx = rte_pktmbuf_pool_create((pn + "rx").c_str(), rx_mbufs, kPoolCache, rx_priv_size(),
                                                          RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
                rte_mempool* desc = rte_pktmbuf_pool_create((pn + "txd").c_str(), 8192, kPoolCache, 0, 0, SOCKET_ID_ANY);
                if (rx == nullptr || desc == nullptr) return fail("cannot create the mbuf pools of proxy " + pn);
                mempools.push_back(rx);
                mempools.push_back(desc);
                if (plan.fabric == "memif") {
                    // A full mesh: one memif link per pair of proxies in different clusters; the
                    // lower cluster id serves the socket. Every frame in one memif buffer: frames
                    // chained over several buffers (MTU above 2034 with the default 2048) came out
                    // of DPDK 22.11's memif many times over (millions of duplicates, then a crash).
                    const uint32_t memif_bsize = std::max<uint32_t>(2048, std::bit_ceil(plan.mtu_bytes + 14));
                    for (const ProxyAddr& peer : pc.peers) {
                        const std::string name = "net_memif_" + std::to_string(p) + "_" + std::to_string(peer.cluster) +
                                                 "_" + std::to_string(peer.index);
                        const std::string args = name + ",role=" + (me < peer.cluster ? "server" : "client") +
                                                 ",socket=" + link_socket(plan, me, p, peer.cluster, peer.index) +
                                                 ",socket-abstract=no,bsize=" + std::to_string(memif_bsize);
                        if (!px->add_port(args, rx, desc, {peer.mac}, plan.link_timeout_ms, err)) return fail(err);
                        // Adaptive polling: wake the peer proxy after a burst to it (doorbell.hpp;
                        // 22.11's memif has no RX interrupts).
                        if (plan.polling == Polling::kAdaptive &&
                            !px->ring_on_tx(px->port_count() - 1,
                                            doorbell_path(plan.sock_dir, peer.cluster, peer.index), err))
                            return fail(err);
                    }
                    if (plan.polling == Polling::kAdaptive &&
                        !px->sleep_on_doorbell(doorbell_path(plan.sock_dir, me, p), err))
                        return fail(err);
                } else if (plan.fabric == "pci") {
                    // The proxy's NI is one NIC port; a switch joins it to every remote proxy.
                    std::vector<MacAddr> reaches;
                    for (const ProxyAddr& peer : pc.peers) reaches.push_back(peer.mac);
                    if (!px->add_port(pci_address(plan, me, p), rx, desc, reaches, plan.link_timeout_ms, err))
                        return fail(err);
                } else if (plan.fabric == "af_packet") {
                    // The proxy's NI is a veth end on the run's Linux bridge (set up by the
                    // launcher): real kernel Ethernet between the clusters, visible to tcpdump.
                    std::vector<MacAddr> reaches;
                    for (const ProxyAddr& peer : pc.peers) reaches.push_back(peer.mac);
                    const std::string ifname = afp_ifname(plan, me, p);
                    const std::string args = "net_af_packet" + std::to_string(p) + ",iface=" + ifname +
                                             ",blocksz=4096,framesz=2048,framecnt=512";
                    if (!px->add_port(args, rx, desc, reaches, plan.link_timeout_ms, err)) return fail(err);
                    // Adaptive polling: no RX interrupts in 22.11's af_packet, but its socket
                    // polls readable when the kernel puts a frame in the ring.
                    if (plan.polling == Polling::kAdaptive && !px->sleep_in_poll(err) && !err.empty())
                        return fail(err);
                } else {
                    return fail("fabric \"" + plan.fabric +
                                "\" is not available in cluster runs (memif, af_packet, pci and udp are)");
                }
                proxies.push_back(std::move(px));
            }
            for (auto& px : proxies)
                if (!px->wait_links(plan.link_timeout_ms, err)) return fail(err);
            if (!plan.pcap_dir.empty())
                for (uint16_t p = 0; p < nprox; ++p)
                    if (!proxies[p]->start_capture(pcap_path(plan, me, p), plan.pcap_max_bytes, err))
                        return fail("proxy " + std::to_string(me) + "." + std::to_string(p) + ": " + err);
            if (const char* tr = std::getenv("ICCS_TRACE"); tr != nullptr && *tr != '\0') {
                // `iccs run APP --trace FILE` (cli/run_app.cpp merges the parts): a record per message
                // each way, ICCS_TRACE_RECORDS per proxy at most (default 262144; more are counted).
                constexpr unsigned long long kMaxRecords = 1ull << 24;  // 640 MiB a proxy
                const char* cap = std::getenv("ICCS_TRACE_RECORDS");
                unsigned long long n = 262144;
                if (cap != nullptr) {
                    char* end = nullptr;
                    n = std::strtoull(cap, &end, 10);
                    if (*cap == '\0' || *end != '\0' || n < 1 || n > kMaxRecords)
                        return fail(std::string("ICCS_TRACE_RECORDS=") + cap + ": expected 1.." +
                                    std::to_string(kMaxRecords) + " records per proxy");
                }
                for (auto& px : proxies) px->start_trace(static_cast<size_t>(n));
            }
            const uint64_t now = now_ns();
            for (auto& px : proxies) px->open_subconnections(now);
            return true;
        };
        bool ok = setup();
        if (ok) {
            {
                std::lock_guard<std::mutex> lock(g_proxies_mu);
                g_proxies = &proxies;
            }
            rte_telemetry_register_cmd("/iccs/proxies", tel_proxies, "Proxies of this cluster. No parameters");
            rte_telemetry_register_cmd("/iccs/proxy/stats", tel_proxy_stats,
                                       "Counters of one proxy. Parameter: proxy index");
            rte_telemetry_register_cmd("/iccs/wan/links", tel_wan_links,
                                       "WAN emulation of one proxy: the links it emulates (parameters, counters) "
                                       "and the recent changes. Parameter: proxy index");
            rte_telemetry_register_cmd("/iccs/wan/set", tel_wan_set,
                                       "WAN emulation: set link A -> B. Parameters: A,B,BW_BYTES_PER_S,LAT_S[,sym]");
            rte_telemetry_register_cmd("/iccs/wan/loss", tel_wan_loss,
                                       "WAN emulation: loss of link A -> B. Parameters: A,B,PROBABILITY[,sym]");
            rte_telemetry_register_cmd("/iccs/wan/mode", tel_wan_mode,
                                       "WAN emulation: what drives the links. Parameter: constant, script, series, live");
            if (plan.quiet && !proxies.empty() && proxies[0]->wake_path().rfind("NOT", 0) == 0)
                std::fprintf(stderr, "cluster %u: proxies %s\n", me, proxies[0]->wake_path().c_str());
            if (!plan.quiet) {
                // Which fabric and which I/O path (the kernel's, or DPDK's), in one line.
                std::string io = proxies.empty() ? std::string("-") : proxies[0]->io_path();
                if (plan.fabric == "udp")
                    io += "; sockets " + to_string(udp_ip(plan, me, 0)) + ":" + std::to_string(udp_port(plan, me, 0)) +
                          (nprox > 1 ? ".." + std::to_string(udp_port(plan, me, static_cast<uint16_t>(nprox - 1)))
                                     : std::string());
                const std::string wake = proxies.empty() ? std::string() : proxies[0]->wake_path();
                std::fprintf(stderr, "cluster %u: %u proxies, %u compute threads%s, fabric %s (%s), polling %s%s%s, EAL %s%s\n",
                             me, nprox, plan.last_is_service ? plan.threads - 1u : plan.threads,
                             plan.last_is_service ? " and the runtime's service endpoint" : "", plan.fabric.c_str(), io.c_str(),
                             plan.polling == Polling::kBusy ? "busy"
                             : plan.polling == Polling::kInline ? "inline" : "adaptive",
                             wake.empty() ? "" : ": ", wake.c_str(), prefix.c_str(),
                             !plan.auth ? ""
                             : plan.auth->encrypt ? ", datagrams authenticated and encrypted (AES-128-GCM)"
                                                  : ", datagrams authenticated (AES-128-GCM)");
            }
            if (plan.polling != Polling::kInline) {
                unsigned lcore = 0;
                uint16_t p = 0;
                RTE_LCORE_FOREACH_WORKER(lcore) {
                    if (p < proxies.size()) rte_eal_remote_launch(proxy_lcore_main, proxies[p++].get(), lcore);
                }
            }
            // The compute threads: each with its own convergence module over the shared proxies.
            ConvNet net;
            net.cluster = me;
            net.clusters = plan.clusters;
            net.mtu_bytes = plan.mtu_bytes;
            net.rings = &rings;
            net.pool = pool.get();
            for (uint16_t c = 0; c < plan.clusters; ++c) {
                net.ni_addrs.emplace_back();
                for (uint16_t q = 0; q < plan.proxies_per_cluster[c]; ++q) net.ni_addrs[c].push_back(proxy_ip(plan, c, q));
            }
            if (plan.polling == Polling::kInline)
                net.poll_inline = [&proxies](uint64_t now) {
                    for (auto& px : proxies) px->try_poll_inline(now);
                };
            // The assist (proxy.hpp); over fabric udp a compute thread takes the socket's direct
            // path (recvmmsg/sendmmsg: proxy/uring_udp.hpp), the ring being the proxy thread's.
            if (assisting) {
                net.poll_assist = [&proxies](int32_t p, uint64_t now) -> uint32_t {
                    if (p >= 0) return proxies[static_cast<size_t>(p)]->try_poll_inline(now);
                    uint32_t work = 0;
                    for (auto& px : proxies) work += px->try_poll_inline(now);
                    return work;
                };
                net.poll_leaving = [&proxies](uint32_t p, bool to_sleep) -> uint32_t {
                    return proxies[p]->poll_leaving(to_sleep);
                };
            }
            const ComputeProgram program = plan.program ? plan.program
                                           : plan.workload == "pingpong" ? program_pingpong
                                           : plan.workload == "errors"   ? program_errors
                                           : plan.workload == "stream"   ? program_stream
                                                                         : program_alltoall;
            std::vector<ComputeResult> results(plan.threads);
            std::vector<ConvCounters> conv_counters(plan.threads);
            std::vector<std::thread> threads;
            for (uint16_t t = 0; t < plan.threads; ++t) {
                threads.emplace_back([&, t] {
                    if (!plan.compute_cores.empty())
                        pin_self(plan.compute_cores[(me * plan.threads + t) % plan.compute_cores.size()]);
                    // A thread that runs the proxies' iterations (inline polling, the assist)
                    // gets mempool caches of its own (dpdk_env.hpp): every buffer it takes or
                    // gives back was otherwise a compare-and-swap on the pool's shared ring (some
                    // 16 a round trip). Under adaptive polling that took the memif round trip
                    // from ~3.4 to ~1.8 us (perf/README.md, issue 21). What a registered thread
                    // can park in its caches is in rx_mbufs (kLcoreCacheMax). Not for threads
                    // that only free received frames (busy polling, the assist off): they would
                    // park buffers where no rx_burst draws on them.
                    const EalThreadScope eal_thread(threads_register);
                    Convergence conv(net, t, plan.conv);
                    ComputeEnv env{plan, t, conv, results[t], &rings};
                    if (!program(env) && results[t].error.empty()) results[t].error = "the program failed";
                    conv_counters[t] = conv.counters();
                });
            }
            for (auto& th : threads) th.join();
            for (uint16_t t = 0; t < plan.threads; ++t) {
                const ComputeResult& r = results[t];
                rep.sent += r.sent;
                rep.received += r.received;
                rep.corrupt += r.corrupt;
                rep.duplicates += r.duplicates;
                if (plan.workload == "alltoall" && !plan.program) {
                    const uint64_t expected = uint64_t{plan.clusters - 1u} * plan.threads * plan.messages;
                    rep.missing += expected - std::min(expected, r.received);
                }
                if (!r.error.empty() && rep.error.empty())
                    rep.error = "thread " + std::to_string(t) + ": " + r.error;
                rep.threads.push_back(conv_counters[t]);
            }
            // End of run: the proxies tell every other cluster we are done (status messages),
            // and keep running until every other cluster said the same (or is down) and
            // nothing is unacked, so the others' last messages and acks are answered.
            rings.set_local_done();
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            auto all_idle = [&] {
                for (auto& px : proxies)
                    if (!px->idle()) return false;
                return true;
            };
            auto others = [&](bool down_counts) {
                uint32_t n = 0;
                for (uint16_t c = 0; c < plan.clusters; ++c)
                    if (c != me && (rings.cluster_done(c) || (down_counts && rings.cluster_down(c)))) ++n;
                return n;
            };
            while (!g_stop && (others(true) < plan.clusters - 1u || !all_idle()) &&
                   std::chrono::steady_clock::now() < deadline) {
                if (net.poll_inline) net.poll_inline(now_ns());
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
            // linger: answer the last retransmissions and acks of the others
            const auto linger = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
            while (!g_stop && std::chrono::steady_clock::now() < linger) {
                if (net.poll_inline) net.poll_inline(now_ns());
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
            const uint32_t dones = others(false);
            if (g_stop && rep.error.empty()) rep.error = "stopped by a signal";
            if (dones < plan.clusters - 1u && rep.error.empty() && plan.workload != "errors")
                rep.error = "not every other cluster finished (" + std::to_string(dones) + " of " +
                            std::to_string(plan.clusters - 1) + " said done)";
            for (auto& px : proxies) px->stop();
            rte_eal_mp_wait_lcore();
            for (auto& px : proxies) {
                if (plan.polling == Polling::kInline) px->poll_once(now_ns());  // publish
                rep.proxies.push_back(px->snapshot());
                rep.wan.push_back(px->wan_view());
                px->finish_capture();  // nothing polls it any more: the file is complete
                if (const char* tr = std::getenv("ICCS_TRACE"); tr != nullptr && *tr != '\0') {
                    std::string terr;
                    const std::string path = std::string(tr) + ".c" + std::to_string(me) + ".p" +
                                             std::to_string(px->config().index);
                    if (!px->finish_trace(path, terr) && rep.error.empty()) rep.error = terr;
                }
            }
            std::lock_guard<std::mutex> lock(g_proxies_mu);
            g_proxies = nullptr;
        }
        rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
        rep.ok = ok && rep.error.empty() && rep.corrupt == 0 && rep.duplicates == 0 && rep.missing == 0 && !g_stop;
        if (ok && !rep.ok && rep.error.empty())
            rep.error = g_stop ? "stopped by a signal" : "messages missing, duplicated or corrupt";
        for (auto& px : proxies) px->finish_capture();  // also when the run failed: keep what was seen
        if (plan.exit_without_teardown) {
            // A process about to _exit() leaves its memory to the kernel. Closing memif ports here
            // raced the PMD's socket handler on the EAL interrupt thread when a peer cluster hung
            // up at the same moment (a crash in librte_net_memif, about 1 run in 20 of 3x2):
            // nothing of DPDK is torn down, only the files another process could trip over.
            for (auto& px : proxies) (void)px.release();
            for (auto& sp : stack_pools) (void)sp.release();
            (void)pool.release();
            eal_remove_runtime_dir(prefix);
            return rep;
        }
        proxies.clear();  // before the pools they draw from
        stack_pools.clear();
        for (rte_mempool* mp : mempools) rte_mempool_free(mp);
    }
    eal_stop(prefix);
    return rep;
}

std::string pcap_path(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return plan.pcap_dir + "/cluster" + std::to_string(cluster) + "-proxy" + std::to_string(proxy) + ".pcapng";
}

bool pcap_dir_ready(const std::string& dir, std::string& err) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
        // A directory we create is owner-only; one the user gave keeps its mode (the files are 0600).
        const OwnerOnlyUmask owner_only;
        std::filesystem::create_directories(dir, ec);
    }
    if (ec) {
        err = "--pcap " + dir + ": cannot create the directory: " + ec.message();
        return false;
    }
    if (!std::filesystem::is_directory(dir, ec)) {
        err = "--pcap " + dir + ": not a directory";
        return false;
    }
    if (access(dir.c_str(), W_OK | X_OK) != 0) {
        err = "--pcap " + dir + ": not writable: " + std::strerror(errno);
        return false;
    }
    return true;
}

void print_report(const ClusterPlan& plan, const ClusterReport& r, FILE* out) {
    std::fprintf(out, "cluster %u: %s  sent %llu, received %llu, missing %llu, duplicated %llu, corrupt %llu, %.2f s%s%s\n",
                plan.cluster_id, r.ok ? "PASS" : "FAIL", static_cast<unsigned long long>(r.sent),
                static_cast<unsigned long long>(r.received), static_cast<unsigned long long>(r.missing),
                static_cast<unsigned long long>(r.duplicates), static_cast<unsigned long long>(r.corrupt), r.seconds,
                r.error.empty() ? "" : "  error: ", r.error.c_str());
    for (size_t i = 0; i < r.proxies.size(); ++i) {
        const ProxySnapshot& s = r.proxies[i];
        const double util = s.proxy.total_ns ? static_cast<double>(s.proxy.busy_ns) / s.proxy.total_ns : 0.0;
        const double qlen = s.proxy.total_ns ? static_cast<double>(s.proxy.queue_ns_sum) / s.proxy.total_ns : 0.0;
        std::fprintf(out, "  proxy %u.%zu: msgs tx %llu rx %llu, frames tx %llu rx %llu (tx ring full %llu), retx %llu, dup %llu, "
                    "csum drops %llu, reass drops %llu, window stalls %llu, ring full %llu, util %.2f, queue %.2f, "
                    "msg time mean %.1f us (p50 < %.1f, p99 < %.1f)\n",
                    plan.cluster_id, i, static_cast<unsigned long long>(s.proxy.msgs_tx),
                    static_cast<unsigned long long>(s.proxy.msgs_rx), static_cast<unsigned long long>(s.port_tx),
                    static_cast<unsigned long long>(s.port_rx), static_cast<unsigned long long>(s.port_tx_ring_full),
                    static_cast<unsigned long long>(s.slidwin.tx_retx),
                    static_cast<unsigned long long>(s.slidwin.rx_dup),
                    static_cast<unsigned long long>(s.stack.drop_ip_csum + s.stack.drop_udp_csum),
                    static_cast<unsigned long long>(s.stack.drop_reass_overlap + s.stack.drop_reass_timeout +
                                                    s.stack.drop_reass_cap + s.stack.drop_reass_oversize),
                    static_cast<unsigned long long>(s.slidwin.window_stalls),
                    static_cast<unsigned long long>(s.proxy.ring_full), util, qlen,
                    s.proxy.msg_time_count ? static_cast<double>(s.proxy.msg_time_sum_ns) / s.proxy.msg_time_count / 1000.0
                                           : 0.0,
                    static_cast<double>(msg_time_quantile_ns(s.proxy, 0.50)) / 1000.0,
                    static_cast<double>(msg_time_quantile_ns(s.proxy, 0.99)) / 1000.0);
        // Frames that were not the run's own (issue 17), by reason; only when there were some.
        const SlidwinCounters& w = s.slidwin;
        if (w.drop_token + w.drop_out_of_window + w.drop_unsynced + w.drop_unknown_subconn + w.drop_auth +
                w.restart_challenges + s.proxy.peers_restarted != 0)
            std::fprintf(out, "  foreign %u.%zu: drop_token %llu, drop_out_of_window %llu, drop_unsynced %llu, "
                        "drop_unknown_subconn %llu, drop_auth %llu, restart_challenges %llu, peers_restarted %llu\n",
                        plan.cluster_id, i, static_cast<unsigned long long>(w.drop_token),
                        static_cast<unsigned long long>(w.drop_out_of_window),
                        static_cast<unsigned long long>(w.drop_unsynced),
                        static_cast<unsigned long long>(w.drop_unknown_subconn),
                        static_cast<unsigned long long>(w.drop_auth),
                        static_cast<unsigned long long>(w.restart_challenges),
                        static_cast<unsigned long long>(s.proxy.peers_restarted));
        if (plan.polling == Polling::kAdaptive)  // who ran the iterations, how often the thread slept
            std::fprintf(out, "  polling %u.%zu: adaptive, %llu iterations with work run by compute threads (assists), "
                        "%llu sleeps, %llu doorbells rung\n",
                        plan.cluster_id, i, static_cast<unsigned long long>(s.proxy.assists),
                        static_cast<unsigned long long>(s.proxy.sleeps),
                        static_cast<unsigned long long>(s.proxy.bell_rings));
        if (plan.polling == Polling::kAdaptive && s.kernel_udp)  // the assist's direct path (uring_udp.hpp)
            std::fprintf(out, "  direct %u.%zu: compute threads took %llu datagrams from the socket (%llu recvmmsg, %llu "
                        "empty) and sent %llu (%llu sendmmsg, %llu refused for now)\n",
                        plan.cluster_id, i, static_cast<unsigned long long>(s.uring.rx_direct_datagrams),
                        static_cast<unsigned long long>(s.uring.rx_direct_calls),
                        static_cast<unsigned long long>(s.uring.rx_direct_empty),
                        static_cast<unsigned long long>(s.uring.tx_direct_datagrams),
                        static_cast<unsigned long long>(s.uring.tx_direct_calls),
                        static_cast<unsigned long long>(s.uring.tx_direct_again));
        if (s.proxy.combined_dgrams + s.proxy.bundles_rx + s.proxy.bad_bundle > 0)  // message combining
            std::fprintf(out, "  combining %u.%zu: sent %llu messages in %llu bundles (%.1f per datagram), received %llu "
                        "messages in %llu bundles, bad bundles %llu\n",
                        plan.cluster_id, i, static_cast<unsigned long long>(s.proxy.combined_msgs),
                        static_cast<unsigned long long>(s.proxy.combined_dgrams),
                        s.proxy.combined_dgrams ? static_cast<double>(s.proxy.combined_msgs) / s.proxy.combined_dgrams
                                                : 0.0,
                        static_cast<unsigned long long>(s.proxy.bundle_msgs_rx),
                        static_cast<unsigned long long>(s.proxy.bundles_rx),
                        static_cast<unsigned long long>(s.proxy.bad_bundle));
        if (s.proxy.bundle_nobuf > 0)
            std::fprintf(out, "  combining %u.%zu: unpacking waited for buffers %llu times\n", plan.cluster_id, i,
                         static_cast<unsigned long long>(s.proxy.bundle_nobuf));
        if (!plan.pcap_dir.empty()) {
            const std::string file = pcap_path(plan, plan.cluster_id, static_cast<uint16_t>(i));
            std::fprintf(out, "  capture %u.%zu: %s: %llu frames", plan.cluster_id, i, file.c_str(),
                        static_cast<unsigned long long>(s.proxy.capture_frames));
            if (s.proxy.capture_missed != 0)
                std::fprintf(out, ", stopped at [machine] pcap_max_bytes = %llu: %llu frames missed",
                            static_cast<unsigned long long>(plan.pcap_max_bytes),
                            static_cast<unsigned long long>(s.proxy.capture_missed));
            std::fprintf(out, "\n");
        }
        if (i < r.wan.size() && r.wan[i].on)  // WAN stage: per link it emulates, what it carried and lost
            for (const WanView::Link& l : r.wan[i].links)
                std::fprintf(out, "  wan %u.%zu: link %u->%u msgs %llu bytes %llu dropped %llu (loss %g)\n", plan.cluster_id, i,
                            l.a, l.b, static_cast<unsigned long long>(l.counters.msgs),
                            static_cast<unsigned long long>(l.counters.bytes),
                            static_cast<unsigned long long>(l.counters.dropped), l.params.loss);
    }
    const size_t nprox = plan.proxies_per_cluster.empty() ? 0 : plan.proxies_per_cluster[plan.cluster_id];
    for (size_t t = 0; t < r.threads.size(); ++t) {
        const ConvCounters& c = r.threads[t];
        std::string per;
        for (size_t q = 0; q < nprox && q < ConvCounters::kProxiesCounted; ++q) {
            if (q) per += ' ';
            per += std::to_string(c.to_proxy[q]);
        }
        std::fprintf(out, "  thread %u.%zu: msgs sent %llu received %llu, pieces sent %llu, to proxies [%s], waits: ring %llu "
                    "buffers %llu window %llu, credits %llu, stale %llu\n",
                    plan.cluster_id, t, static_cast<unsigned long long>(c.msgs_sent),
                    static_cast<unsigned long long>(c.msgs_received), static_cast<unsigned long long>(c.pieces_sent),
                    per.c_str(), static_cast<unsigned long long>(c.ring_full_waits),
                    static_cast<unsigned long long>(c.pool_empty_waits), static_cast<unsigned long long>(c.window_waits),
                    static_cast<unsigned long long>(c.credits_sent), static_cast<unsigned long long>(c.stale));
    }
    std::fflush(stdout);
}

// ---- the launcher

static std::vector<pid_t> g_children;
static void forward_signal(int sig) {
    for (pid_t c : g_children) kill(c, sig == SIGINT ? SIGTERM : sig);
}

// fabric af_packet: a Linux bridge "icbr<run>" and, per proxy, a veth pair whose "ic..." end the
// proxy's af_packet port opens and whose "ib..." end is on the bridge. No IP address is given
// to the kernel side (the stacks are in the proxies); IPv6 is off so the kernel stays quiet.
static bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

static std::string afp_bridge(const ClusterPlan& plan) { return "icbr" + plan.run_id; }

bool afp_fabric_up(const ClusterPlan& plan) {
    const std::string br = afp_bridge(plan);
    if (!sh("ip link add " + br + " type bridge") || !sh("ip link set " + br + " up")) {
        std::fprintf(stderr, "iccs: fabric af_packet needs root and iproute2 to create bridge %s and veth pairs\n",
                     br.c_str());
        return false;
    }
    sh("sysctl -w net.ipv6.conf." + br + ".disable_ipv6=1");
    for (uint16_t c = 0; c < plan.clusters; ++c)
        for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p) {
            const std::string a = afp_ifname(plan, c, p);
            std::string b = a;
            b[1] = 'b';
            const std::string mtu = std::to_string(plan.mtu_bytes);
            if (!sh("ip link add " + a + " mtu " + mtu + " type veth peer name " + b + " mtu " + mtu) ||
                !sh("ip link set " + b + " master " + br) || !sh("ip link set " + b + " up") ||
                !sh("ip link set " + a + " up")) {
                std::fprintf(stderr, "iccs: cannot create veth pair %s/%s on bridge %s\n", a.c_str(), b.c_str(),
                             br.c_str());
                return false;
            }
            sh("sysctl -w net.ipv6.conf." + a + ".disable_ipv6=1");
            sh("sysctl -w net.ipv6.conf." + b + ".disable_ipv6=1");
        }
    return true;
}

void afp_fabric_down(const ClusterPlan& plan) {
    for (uint16_t c = 0; c < plan.clusters; ++c)
        for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p) sh("ip link del " + afp_ifname(plan, c, p));
    sh("ip link del " + afp_bridge(plan));
}

// Runtime dirs and socket dirs of runs whose launcher is gone (killed with SIGKILL, or the
// machine rebooted mid-run): iccs-<pid>-c<id> and /tmp/iccs-<pid> with no process <pid>.
static void remove_stale_runs() {
    std::error_code ec;
    auto stale = [](const std::string& name, const char* prefix) -> bool {
        if (name.rfind(prefix, 0) != 0) return false;
        const std::string rest = name.substr(std::strlen(prefix));
        char* end = nullptr;
        const long pid = std::strtol(rest.c_str(), &end, 10);
        if (end == rest.c_str() || pid <= 0 || (*end != '\0' && *end != '-')) return false;
        return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    };
    const std::string rundir = std::filesystem::path(eal_runtime_dir("x")).parent_path();
    for (const auto& e : std::filesystem::directory_iterator(rundir, ec))
        if (stale(e.path().filename().string(), "iccs-")) std::filesystem::remove_all(e.path(), ec);
    for (const auto& e : std::filesystem::directory_iterator("/tmp", ec))
        if (e.is_directory(ec) && stale(e.path().filename().string(), "iccs-")) std::filesystem::remove_all(e.path(), ec);
}

int launch_clusters(ClusterPlan plan, uint32_t timeout_s) {
    if (plan.run_id.empty()) plan.run_id = std::to_string(getpid());
    signal(SIGPIPE, SIG_IGN);  // a closed stdout (`| head`) must not kill a run before it cleans up
    remove_stale_runs();
    plan.sock_dir = "/tmp/iccs-" + plan.run_id;
    std::error_code ec;
    {
        // Owner-only (0700), and never another user's directory or a planted symlink (issue 17).
        std::string err;
        struct stat st{};
        if (lstat(plan.sock_dir.c_str(), &st) == 0 && (S_ISLNK(st.st_mode) || st.st_uid != geteuid()))
            err = plan.sock_dir + ": permission denied: owned by UID " + std::to_string(st.st_uid) +
                  (S_ISLNK(st.st_mode) ? " (a symlink)" : "");
        if (err.empty()) std::filesystem::remove_all(plan.sock_dir, ec);  // a stale socket says "Address already in use"
        if (err.empty()) make_private_dir(plan.sock_dir, err);
        if (!err.empty()) {
            std::fprintf(stderr, "iccs: run directory %s\n", err.c_str());
            return 2;
        }
    }
    if (plan.fabric == "udp" && !plan.no_fabric) {
        // Refused io_uring (old kernel, seccomp, io_uring_disabled) stops the run here, with the
        // alternative named, not later inside every cluster.
        UringCaps caps;
        std::string err;
        if (!uring_probe(caps, err)) {
            std::fprintf(stderr, "iccs: %s\n", err.c_str());
            std::filesystem::remove_all(plan.sock_dir, ec);
            return 2;
        }
    }
    if (!plan.pcap_dir.empty() && !plan.no_fabric) {
        std::string err;
        if (plan.fabric == "udp") err = "--pcap records the frames of DPDK ports (fabrics memif, af_packet, pci); "
                                        "fabric udp has kernel sockets and no frames (capture those with tcpdump -i lo)";
        if (err.empty()) pcap_dir_ready(plan.pcap_dir, err);
        if (!err.empty()) {
            std::fprintf(stderr, "iccs: %s\n", err.c_str());
            std::filesystem::remove_all(plan.sock_dir, ec);
            return 2;
        }
    }
    const bool afp = plan.fabric == "af_packet" && !plan.no_fabric;
    if (afp && !afp_fabric_up(plan)) {
        afp_fabric_down(plan);
        std::filesystem::remove_all(plan.sock_dir, ec);
        return 1;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    g_children.clear();
    for (uint16_t c = 0; c < plan.clusters; ++c) {
        const pid_t pid = fork();
        if (pid < 0) {
            std::perror("fork");
            forward_signal(SIGTERM);
            return 1;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the launcher
            // A crash says where, on stderr, before the launcher reports the signal.
            signal(SIGSEGV, [](int sig) {
                void* frames[48];
                const int n = backtrace(frames, 48);
                const char msg[] = "iccs: cluster process crashed; backtrace:\n";
                (void)!write(2, msg, sizeof msg - 1);
                backtrace_symbols_fd(frames, n, 2);
                signal(sig, SIG_DFL);
                raise(sig);
            });
            // A quiet run (a benchmark) keeps stdout for its own result (`bench --json`): the
            // cluster's report goes to stderr.
            if (plan.quiet) dup2(2, 1);
            ClusterPlan mine = plan;
            mine.cluster_id = c;
            mine.exit_without_teardown = true;  // this process _exit()s right after the report
            if (plan.process_main) {
                const int rc = plan.process_main(mine);
                std::fflush(stdout);
                std::fflush(stderr);
                _exit(rc);
            }
            const ClusterReport r = run_cluster(mine);
            if (!plan.quiet || !r.ok) print_report(mine, r);  // benchmarks print their own figures
            std::fflush(stdout);
            _exit(r.ok ? 0 : 1);
        }
        g_children.push_back(pid);
    }
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    int failures = 0, first_status = 0;
    size_t left = g_children.size();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    bool timed_out = false, stopping = false;
    std::chrono::steady_clock::time_point kill_at{}, grace_until{};
    std::vector<bool> reaped(g_children.size(), false);
    // SIGTERM to every cluster still running, SIGKILL to those still there 5 s later.
    auto stop_all = [&] {
        if (stopping) return;
        stopping = true;
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        for (size_t i = 0; i < g_children.size(); ++i)
            if (!reaped[i]) kill(g_children[i], SIGTERM);
    };
    while (left > 0) {
        int status = 0;
        const pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            for (size_t i = 0; i < g_children.size(); ++i) {
                if (g_children[i] != pid) continue;
                reaped[i] = true;
                --left;
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
                if (plan.workload == "errors" && i == 1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
                    std::fprintf(stderr, "iccs: cluster 1 killed itself, as the errors program does\n");
                    continue;
                }
                ++failures;
                // Name the cluster and what ended it; the run's status is the first failing
                // cluster's own (a program's exit(3) makes `iccs run` exit 3; a signal, 128 + it).
                if (WIFSIGNALED(status))
                    std::fprintf(stderr, "iccs: cluster %zu died of signal %d (%s)\n", i, WTERMSIG(status),
                                 strsignal(WTERMSIG(status)));
                else if (WIFEXITED(status))
                    std::fprintf(stderr, "iccs: cluster %zu exited with status %d\n", i, WEXITSTATUS(status));
                if (first_status == 0)
                    first_status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
                // The others find out through their proxies (peer time-out) and report it; give
                // them that long, then stop them.
                if (!stopping && grace_until == std::chrono::steady_clock::time_point{})
                    grace_until = std::chrono::steady_clock::now() +
                                  std::chrono::milliseconds(plan.peer_timeout_ms != 0 ? plan.peer_timeout_ms + 5000 : 0);
            }
            continue;
        }
        const auto now = std::chrono::steady_clock::now();
        if (grace_until != std::chrono::steady_clock::time_point{} && now > grace_until) stop_all();
        if (!timed_out && now > deadline) {
            std::fprintf(stderr, "iccs: run timed out after %u s: stopping the clusters\n", timeout_s);
            timed_out = true;
            stop_all();
        }
        if (stopping && now > kill_at) {
            for (size_t i = 0; i < g_children.size(); ++i)
                if (!reaped[i]) kill(g_children[i], SIGKILL);
            kill_at = now + std::chrono::hours(1);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Whatever a crashed cluster left behind.
    for (uint16_t c = 0; c < plan.clusters; ++c) eal_remove_runtime_dir(eal_prefix(plan, c));
    std::filesystem::remove_all(plan.sock_dir, ec);
    if (afp) afp_fabric_down(plan);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (failures == 0 && !timed_out) return 0;
    return first_status != 0 ? first_status : 1;
}

}  // namespace iccs
