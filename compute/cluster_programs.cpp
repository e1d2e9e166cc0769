// cluster_programs.cpp: see cluster_programs.hpp.
#include "cluster_programs.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "activity.hpp"
#include "cluster_stop.hpp"
#include "stamps.hpp"

namespace iccs {

namespace {

constexpr uint16_t kAppPort = 1000;  // the built-in programs: thread t listens on kAppPort + t

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

// The soak's count file: how many messages thread src_t of cluster src_c sent to thread dst_t of
// cluster dst_c (written once, when its sending ended; renamed into place, so a reader sees it whole).
std::string soak_count_path(const ClusterPlan& p, uint32_t src_c, uint32_t src_t, uint32_t dst_c, uint32_t dst_t) {
    return p.sock_dir + "/soak-" + std::to_string(src_c) + "." + std::to_string(src_t) + "-" + std::to_string(dst_c) +
           "." + std::to_string(dst_t);
}

bool soak_write_count(const std::string& path, uint64_t n) {
    const std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) return false;
    const bool ok = std::fprintf(f, "%llu\n", static_cast<unsigned long long>(n)) > 0;
    return std::fclose(f) == 0 && ok && std::rename(tmp.c_str(), path.c_str()) == 0;
}

// The count in a soak count file; false while it is not there yet.
bool soak_read_count(const std::string& path, uint64_t& n) {
    FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) return false;
    unsigned long long v = 0;
    const bool ok = std::fscanf(f, "%llu", &v) == 1;
    std::fclose(f);
    n = v;
    return ok;
}

// Connect, retrying while the server is not listening yet (it starts at its own pace).
ConvError connect_retry(Convergence& conv, Endpoint to, Connection*& out, const ClusterPlan& p) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(p.link_timeout_ms);
    while (true) {
        const ConvError e = conv.connect(to, out);
        if (e != ConvError::kRefused || cluster_stopping() || std::chrono::steady_clock::now() > until) return e;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

bool set_error(ComputeEnv& env, const std::string& what, ConvError e) {
    env.result.error = what + ": " + conv_strerror(e) + " (" + env.conv.last_error() + ")";
    return false;
}

// One compute thread's part of alltoall (see program_alltoall below): its connections, the check
// of every message it receives, and a soak's bookkeeping.
class AlltoallThread {
public:
    explicit AlltoallThread(ComputeEnv& env)
        : env_(env), p_(env.plan), conv_(env.conv), soak_(p_.soak_s > 0), limit_(soak_ ? UINT64_MAX : p_.messages),
          me_(p_.cluster_id), t_(env.thread), expect_in_(size_t{p_.clusters - 1u} * p_.threads) {}

    bool run() {
        if (const ConvError e = conv_.listen(static_cast<uint16_t>(kAppPort + t_)); e != ConvError::kOk)
            return set_error(env_, "listen", e);
        if (!connect_all()) return false;
        // --gap-us: the connections are open; the proxies idle this long, then the burst (tests of
        // wake on arrival, issue 21). The inbound ones are accepted first: a peer's CONNECT is
        // answered only while this thread calls into its module, so a peer that connected after
        // this thread went idle waited the whole gap for the answer, past its connect time-out
        // (idle-wake-afpacket failed so once: "no answer from cluster 1 port 1000 within 5000 ms").
        if (p_.gap_us > 0) {
            if (!accept_all()) return false;
            std::this_thread::sleep_for(std::chrono::microseconds(p_.gap_us));
        }
        if (!exchange()) return false;
        if (cluster_stopping()) return false;
        return close_all();
    }

private:
    using Clock = std::chrono::steady_clock;
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

    // One connection to every compute thread of every other cluster.
    bool connect_all() {
        for (uint16_t dc = 0; dc < p_.clusters; ++dc) {
            if (dc == me_) continue;
            for (uint16_t dt = 0; dt < p_.threads; ++dt) {
                Connection* c = nullptr;
                const ActivityScope doing("alltoall: connecting to cluster", dc);
                if (const ConvError e = connect_retry(conv_, Endpoint{dc, static_cast<uint16_t>(kAppPort + dt)}, c, p_);
                    e != ConvError::kOk)
                    return set_error(env_, "connect to cluster " + std::to_string(dc) + " thread " + std::to_string(dt), e);
                outs_.push_back(Out{c, dc, dt});
            }
        }
        return true;
    }

    // Every inbound connection (one from each compute thread of every other cluster), before a gap.
    bool accept_all() {
        const ActivityScope doing("alltoall: accepting connections");
        while (ins_.size() < expect_in_) {
            Connection* c = nullptr;
            if (const ConvError e = conv_.accept(static_cast<uint16_t>(kAppPort + t_), c, 60'000'000); e != ConvError::kOk)
                return set_error(env_, "accept", e);
            ins_.push_back(In{c, 0, std::vector<uint8_t>(soak_ ? 0 : p_.messages, 0)});
        }
        return true;
    }

    // One received message: its number (conn_seq), size and bytes, exactly once, in order on
    // ordered connections; counted received, duplicate or corrupt.
    void check(In& in, const RecvMsg& m) {
        const uint64_t id = m.conn_seq();
        // the sender's thread: its ephemeral port tells nothing, so the message's number and the
        // remote cluster are checked against every thread of that cluster
        const uint16_t sc = in.c->remote().cluster;
        if (soak_ && id < in.got) {  // (a soak's connections are ordered: an earlier number came again)
            ++env_.result.duplicates;
            return;
        }
        bool ok = id < limit_;
        if (ok && p_.conv.ordered && id != in.got) ok = false;  // ordered: exactly the next one
        if (ok && !soak_ && in.seen[id]) {
            ++env_.result.duplicates;
            return;
        }
        uint16_t st = UINT16_MAX;
        if (ok) {
            const uint32_t len = m.copy_to(buf_.data(), static_cast<uint32_t>(buf_.size()));
            for (uint16_t cand = 0; cand < p_.threads && st == UINT16_MAX; ++cand) {
                if (len != m.size() || len != msg_size(p_, sc, cand, me_, t_, id)) continue;
                bool same = true;
                for (uint32_t k = 0; k < len && same; ++k) same = buf_[k] == msg_byte(sc, cand, id, k);
                if (same) st = cand;
            }
            ok = st != UINT16_MAX;
        }
        if (!ok) {
            ++env_.result.corrupt;
            return;
        }
        if (!soak_) in.seen[id] = 1;
        ++in.got;
        ++env_.result.received;
        activity_progress(1);  // messages delivered (the soak reads them while it runs)
    }

    // A soak's receiving is over when what arrived from each cluster equals the counts its threads
    // wrote (read at most every 10 ms).
    bool soak_all_in() {
        if (ins_.size() < expect_in_) return false;
        const Clock::time_point now = Clock::now();
        if (now - soak_checked_ < std::chrono::milliseconds(10)) return false;
        soak_checked_ = now;
        for (uint16_t sc = 0; sc < p_.clusters; ++sc) {
            if (sc == me_) continue;
            uint64_t sent = 0, got = 0;
            for (uint16_t st = 0; st < p_.threads; ++st) {
                uint64_t n = 0;
                if (!soak_read_count(soak_count_path(p_, sc, st, me_, t_), n)) {
                    soak_short_ = "cluster " + std::to_string(sc) + " thread " + std::to_string(st) + " wrote no count";
                    return false;
                }
                sent += n;
            }
            for (const In& in : ins_)
                if (in.c->remote().cluster == sc) got += in.got;
            if (got != sent) {
                soak_short_ = "from cluster " + std::to_string(sc) + ", " + std::to_string(got) + " of " +
                              std::to_string(sent) + " messages arrived";
                return false;
            }
        }
        return true;
    }

    bool all_in() {
        if (soak_) return soak_all_in();
        if (ins_.size() < expect_in_) return false;
        for (const In& in : ins_)
            if (in.got < p_.messages && !in.eos) return false;
        return true;
    }

    // The soak's end: say what each connection carried.
    bool end_soak_sending() {
        soak_sending_ = false;
        for (const Out& o : outs_)
            if (!soak_write_count(soak_count_path(p_, me_, t_, o.dc, o.dt), o.next)) {
                env_.result.error = "soak: cannot write " + soak_count_path(p_, me_, t_, o.dc, o.dt) + ": " +
                                    std::strerror(errno);
                return false;
            }
        activity_doing_str("alltoall: soak over, taking the last messages");
        return true;
    }

    void fill_poll_items() {
        items_.clear();
        if (ins_.size() < expect_in_)
            items_.push_back(PollItem{nullptr, static_cast<uint16_t>(kAppPort + t_), PollItem::kAcceptable});
        for (Out& o : outs_)
            if (soak_ ? soak_sending_ : o.next < p_.messages) items_.push_back(PollItem{o.c, 0, PollItem::kWritable});
        for (In& in : ins_)
            if (in.got < limit_ && !in.eos) items_.push_back(PollItem{in.c, 0, PollItem::kReadable});
    }

    // Up to 32 messages on a writable connection.
    bool send_burst(Out& o) {
        for (int k = 0; k < 32 && (soak_ ? soak_sending_ : o.next < p_.messages); ++k) {
            const uint32_t size = msg_size(p_, me_, t_, o.dc, o.dt, o.next);
            for (uint32_t b = 0; b < size; ++b) pattern_[b] = msg_byte(me_, t_, o.next, b);
            // the test hook: message 1 (--max-size bytes) of thread 0.0 to thread 1.0 leaves
            // with one byte wrong; its receiver must count it corrupt
            if (p_.inject_error && me_ == 0 && t_ == 0 && o.dc == 1 && o.dt == 0 && o.next == 1 && size > 0)
                pattern_[size / 2] ^= 0x40;
            const ConvError e = conv_.send(o.c, pattern_.data(), size, 0);
            if (e == ConvError::kWouldBlock) break;
            if (e != ConvError::kOk) return set_error(env_, "send", e);
            ++o.next;
            ++sends_done_;
            ++env_.result.sent;
        }
        return true;
    }

    // Up to 64 messages from a readable connection, each checked.
    bool receive_burst(In& in) {
        RecvMsg m;
        for (int k = 0; k < 64 && in.got < limit_; ++k) {
            const ConvError e = conv_.recv_msg(in.c, m, 0);
            if (e == ConvError::kWouldBlock) break;
            // Its sender closed: it sent no more. A soak's counts added up first; otherwise it
            // came before every message did (some arrived corrupt or out of order: the
            // inject-error hook): say so, and go on taking the other connections' messages
            // (failing this thread at once left them untaken, and their senders failed too).
            if (e == ConvError::kEndOfStream) {
                in.eos = true;
                if (!soak_ && in.got < p_.messages && env_.result.error.empty())
                    env_.result.error = "cluster " + std::to_string(in.c->remote().cluster) +
                                        " closed a connection after " + std::to_string(in.got) + " of " +
                                        std::to_string(p_.messages) + " messages arrived intact and in order";
                break;
            }
            if (e != ConvError::kOk) return set_error(env_, "recv", e);
            check(in, m);
        }
        // A soak's connections are ordered: after one bad message every later one is out of
        // order, so the first one ends it, named.
        // The whole cluster stops (its other threads would soak on for nothing); the launcher
        // then stops the others.
        if (soak_ && (env_.result.corrupt != 0 || env_.result.duplicates != 0))
            cluster_stop_now(1, "soak: thread " + std::to_string(t_) + ": message " + std::to_string(in.got) +
                                    " from cluster " + std::to_string(in.c->remote().cluster) +
                                    " arrived corrupt, out of order or twice");
        return true;
    }

    // One polled item: an error ends the thread; accept, send or receive.
    bool serve(const PollItem& it) {
        if (it.revents & PollItem::kError) {
            const ConvError e = conv_.send(it.conn, nullptr, 0, 0);
            return set_error(env_, "connection to cluster " + std::to_string(it.conn->remote().cluster), e);
        }
        if (it.revents & PollItem::kAcceptable) {
            Connection* c = nullptr;
            while (ins_.size() < expect_in_ && conv_.accept(it.listen_port, c, 0) == ConvError::kOk)
                ins_.push_back(In{c, 0, std::vector<uint8_t>(soak_ ? 0 : p_.messages, 0)});
        } else if (it.revents & PollItem::kWritable) {
            Out& o = *std::find_if(outs_.begin(), outs_.end(), [&](const Out& x) { return x.c == it.conn; });
            return send_burst(o);
        } else if (it.revents & PollItem::kReadable) {
            In& in = *std::find_if(ins_.begin(), ins_.end(), [&](const In& x) { return x.c == it.conn; });
            return receive_burst(in);
        }
        return true;
    }

    // Send and receive until every message went out and came in (a soak: until its end, then
    // until the counts add up).
    bool exchange() {
        buf_.resize(p_.max_size);
        const uint64_t to_send = outs_.size() * p_.messages;
        soak_end_ = Clock::now() + std::chrono::seconds(p_.soak_s);
        // How long receivers wait after their own end for the last counts to add up: the peers' end
        // comes a little later than ours, then what is in flight (retransmissions under loss).
        const Clock::time_point soak_give_up =
            soak_end_ + std::chrono::milliseconds(p_.peer_timeout_ms) + std::chrono::seconds(60);
        soak_sending_ = soak_;
        pattern_.resize(p_.max_size);
        activity_doing_str("alltoall: sending and receiving");
        while (!cluster_stopping() && ((soak_ ? soak_sending_ : sends_done_ < to_send) || !all_in())) {
            if (soak_sending_ && Clock::now() >= soak_end_ && !end_soak_sending()) return false;
            if (!soak_sending_ && soak_ && Clock::now() > soak_give_up) {
                env_.result.error = "soak: " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                                 soak_give_up - soak_end_).count()) +
                                    " s after its end, " + soak_short_;
                return false;
            }
            fill_poll_items();
            if (conv_.poll(items_, soak_ ? 100'000 : 1'000'000) == 0) continue;
            for (const PollItem& it : items_)
                if (!serve(it)) return false;
        }
        return true;
    }

    // Close what we sent on (flush: wait until the peer took it all), then see end-of-stream on
    // what we received.
    bool close_all() {
        activity_doing_str("alltoall: closing its connections");
        for (Out& o : outs_) {
            uint64_t unsent = 0;
            if (const ConvError e = conv_.close(o.c, 60'000'000, &unsent); e != ConvError::kOk)
                return set_error(env_, "close", e);
            if (unsent != 0) {
                env_.result.error = "close reported " + std::to_string(unsent) + " messages the peer never took";
                return false;
            }
        }
        activity_doing_str("alltoall: waiting for end-of-stream");
        for (In& in : ins_) {
            RecvMsg m;
            const ConvError e = in.eos ? ConvError::kEndOfStream : conv_.recv_msg(in.c, m, 60'000'000);
            if (e != ConvError::kEndOfStream) return set_error(env_, "recv after the peer closed (want end-of-stream)", e);
            conv_.close(in.c, 0);
        }
        return true;
    }

    ComputeEnv& env_;
    const ClusterPlan& p_;
    Convergence& conv_;
    const bool soak_;
    const uint64_t limit_;  // messages per connection
    const uint16_t me_, t_;
    const size_t expect_in_;
    std::vector<Out> outs_;
    std::vector<In> ins_;
    std::vector<uint8_t> buf_;      // a received message, to check
    std::vector<uint8_t> pattern_;  // a message to send
    std::vector<PollItem> items_;
    uint64_t sends_done_ = 0;
    Clock::time_point soak_end_{};
    bool soak_sending_ = false;
    Clock::time_point soak_checked_{};
    std::string soak_short_;  // what did not add up at the last check ("cluster 2: 10 of 12")
};

}  // namespace

// alltoall: every compute thread opens a parallel connection to every compute thread of every
// other cluster (port kAppPort + thread) and sends `messages` messages over it; every receiver
// checks each message (size and bytes from its number = its conn_seq), exactly once, and in order
// on ordered connections; then each side closes (flushing) and the receiver sees end-of-stream.
// A soak (p.soak_s > 0, ordered connections): senders send until the soak's end and write their
// counts (soak_count_path); receivers check every message in order and go on until what they got
// from each cluster equals the counts its threads wrote.
bool program_alltoall(ComputeEnv& env) { return AlltoallThread(env).run(); }

namespace {
// PingpongTurns: wait until t.turn is `want` (true), or a run failed, this cluster stops or the
// turn went past it (false). Sleeps on the futex (shared: the runs are other processes) 200 us
// at a time, so a run waiting for its turn takes little CPU from the one measuring, and between
// sleeps takes what arrived (inline polling: nothing else runs this thread's stack), so set-ups,
// acks and timers go on as in a run alone.
void poll_once(Convergence& conv) {
    static const std::function<bool()> no_other_work = [] { return false; };
    const uint64_t now = now_ns();
    conv.idle(now, now, no_other_work);  // inline: one pass of the stack; else at most a 1 us wait
    conv.idle_end();
    conv.progress();
}

bool wait_turn(PingpongTurns& t, uint32_t want, Convergence& conv) {
    for (;;) {
        const uint32_t cur = t.turn.load(std::memory_order_acquire);
        if (cur == want) return true;
        if (cur > want || t.abort.load(std::memory_order_relaxed) != 0 || cluster_stopping()) return false;
        const timespec ts{0, 200'000};
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&t.turn), FUTEX_WAIT, cur, &ts, nullptr, 0);
        poll_once(conv);
    }
}

// Block 0 starts when every run's pinger is connected (not while another sets up its EAL).
void wait_all_connected(PingpongTurns& t, uint32_t runs, Convergence& conv) {
    t.ready.fetch_add(1);
    while (t.ready.load() < runs && t.abort.load() == 0 && !cluster_stopping()) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        poll_once(conv);
    }
}

void pass_turn(PingpongTurns& t) {
    t.turn.fetch_add(1, std::memory_order_acq_rel);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&t.turn), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}
}  // namespace

// pingpong (`iccs bench rtt`): thread 0 of cluster 0 sends `messages` messages of min_size bytes
// to thread 0 of cluster 1, which sends each straight back; round-trip times (after `warmup`
// untimed rounds) go to result_file.
bool program_pingpong(ComputeEnv& env) {
    activity_doing_str("pingpong: round trips");
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
    uint64_t rounds = p.warmup + p.messages;
    // Taking turns (PingpongTurns): blocks of warm-up and timed rounds, each in this run's turn.
    PingpongTurns* const turns = p.turns;
    const uint64_t per_block = p.turn_block_warmup + p.turn_block_rounds;
    std::vector<uint64_t> block, block_medians;
    if (turns != nullptr) {
        if (per_block == 0 || p.turn_blocks == 0 || p.turn_runs == 0) {
            env.result.error = "pingpong taking turns: no blocks to run";
            turns->abort.store(1);
            return false;
        }
        rounds = per_block * p.turn_blocks;
        rtt.reserve(p.turn_block_rounds * p.turn_blocks);
        if (pinger) wait_all_connected(*turns, p.turn_runs, conv);
    }
    // ICCS_STAMPS=PREFIX (the breakdown experiment): every round's stage stamps of the ping
    // (stack/stamps.hpp) go to PREFIX.c<cluster>, one line per round: the round and 13 times [ns].
    const char* stamp_prefix = std::getenv("ICCS_STAMPS");
    std::vector<std::array<uint64_t, stamps::kPoints>> stamp_rows;
    if (stamp_prefix != nullptr && *stamp_prefix != '\0') {
        stamps::set_on(true);
        stamp_rows.reserve(rounds);
    }
    for (uint64_t i = 0; i < rounds && !cluster_stopping(); ++i) {
        if (turns != nullptr && i % per_block == 0 &&
            !wait_turn(*turns, p.turn_runs * static_cast<uint32_t>(i / per_block) + p.turn_slot, conv)) {
            env.result.error = "pingpong taking turns: another run failed";
            return false;
        }
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
            if (turns != nullptr ? i % per_block >= p.turn_block_warmup : i >= p.warmup) {
                rtt.push_back(now_ns() - t0);
                if (!sizes.empty()) rtt_by_size[i % sizes.size()].push_back(rtt.back());
                if (turns != nullptr) block.push_back(rtt.back());
            }
            if (turns != nullptr && i % per_block == per_block - 1) {  // this block's end: the next run's turn
                std::sort(block.begin(), block.end());
                block_medians.push_back(block.empty() ? 0 : block[block.size() / 2]);
                block.clear();
                pass_turn(*turns);
            }
        } else {
            if (const ConvError e = conv.send(c, buf.data(), len); e != ConvError::kOk) return set_error(env, "send", e);
            ++env.result.sent;
        }
    }
    // Close only when every run's blocks are done: a close is not a round trip of anyone's.
    if (turns != nullptr) wait_turn(*turns, p.turn_runs * p.turn_blocks, conv);
    if (pinger && !p.result_file.empty() && !rtt.empty()) {
        std::sort(rtt.begin(), rtt.end());
        if (FILE* f = std::fopen(p.result_file.c_str(), "w")) {
            std::fprintf(f, "rtt_ns %llu %llu %llu %llu %zu\n", static_cast<unsigned long long>(rtt[rtt.size() / 2]),
                         static_cast<unsigned long long>(rtt[std::min(rtt.size() - 1, rtt.size() * 99 / 100)]),
                         static_cast<unsigned long long>(rtt.front()), static_cast<unsigned long long>(rtt.back()),
                         rtt.size());
            if (!block_medians.empty()) {
                std::fprintf(f, "rtt_block_ns");
                for (const uint64_t m : block_medians) std::fprintf(f, " %llu", static_cast<unsigned long long>(m));
                std::fprintf(f, "\n");
            }
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
    activity_doing_str("errors: its failure cases");
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
    // A poll (time-out 0) finds nothing yet: would-block, its words naming the peer (made only when
    // asked for, not at every empty poll); the timed-out recv after it has its own words.
    e = conv.recv(c, b, sizeof b, len, 0);
    const std::string poll_words = "no message from " + to_string(Endpoint{1, kAppPort}) + " yet";
    if (e != ConvError::kWouldBlock || conv.last_error() != poll_words) {
        env.result.error = "a poll of a silent peer: " + std::string(conv_strerror(e)) + ": '" + conv.last_error() +
                           "' (want would block: '" + poll_words + "')";
        return false;
    }
    t0 = std::chrono::steady_clock::now();
    e = conv.recv(c, b, sizeof b, len, 50'000);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (e != ConvError::kTimeout || conv.last_error().find("within 50000 us") == std::string::npos)
        return set_error(env, "recv with a 50 ms time-out from a silent peer (want timed out, in its own words)", e);
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
    activity_doing_str("stream: one sender, one receiver");
    const ClusterPlan& p = env.plan;
    Convergence& conv = env.conv;
    if (env.thread != 0 || p.cluster_id > 1) return true;
    std::vector<uint8_t> buf(std::max<uint32_t>(p.min_size, 1), 0x5a);
    // Taking turns (PingpongTurns): blocks of turn_block_rounds messages, each answered, each in
    // this run's turn; else one block of `messages`.
    PingpongTurns* const turns = p.turns;
    const uint32_t blocks = turns != nullptr ? p.turn_blocks : 1;
    const uint64_t per_block = turns != nullptr ? p.turn_block_rounds : p.messages;
    if (turns != nullptr && (blocks == 0 || per_block == 0 || p.turn_runs == 0)) {
        env.result.error = "stream taking turns: no blocks to run";
        turns->abort.store(1);
        return false;
    }
    auto my_turn = [&](uint32_t block) {
        if (turns == nullptr || wait_turn(*turns, p.turn_runs * block + p.turn_slot, conv)) return true;
        env.result.error = "stream taking turns: another run failed";
        return false;
    };
    Connection* c = nullptr;
    if (p.cluster_id == 1) {
        if (const ConvError e = conv.listen(kAppPort); e != ConvError::kOk) return set_error(env, "listen", e);
        if (const ConvError e = conv.accept(kAppPort, c, 60'000'000); e != ConvError::kOk)
            return set_error(env, "accept", e);
        RecvMsg m;
        for (uint32_t b = 0; b < blocks; ++b) {
            if (!my_turn(b)) return false;
            for (uint64_t i = 0; i < per_block; ++i) {
                if (const ConvError e = conv.recv_msg(c, m, 60'000'000); e != ConvError::kOk)
                    return set_error(env, "recv", e);
                ++env.result.received;
            }
            if (const ConvError e = conv.send(c, buf.data(), 1); e != ConvError::kOk) return set_error(env, "send", e);
            ++env.result.sent;
        }
        if (turns != nullptr) wait_turn(*turns, p.turn_runs * blocks, conv);
        conv.recv_msg(c, m, 10'000'000);  // end-of-stream
        conv.close(c, 0);
        return true;
    }
    if (const ConvError e = connect_retry(conv, Endpoint{1, kAppPort}, c, p); e != ConvError::kOk)
        return set_error(env, "connect", e);
    if (turns != nullptr) wait_all_connected(*turns, p.turn_runs, conv);
    uint64_t elapsed = 0;
    std::vector<uint64_t> block_ns;
    for (uint32_t b = 0; b < blocks && !cluster_stopping(); ++b) {
        if (!my_turn(b)) return false;
        const uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < per_block && !cluster_stopping(); ++i) {
            if (const ConvError e = conv.send(c, buf.data(), p.min_size); e != ConvError::kOk)
                return set_error(env, "send", e);
            ++env.result.sent;
        }
        uint32_t len = 0;
        if (const ConvError e = conv.recv(c, buf.data(), static_cast<uint32_t>(buf.size()), len, 60'000'000);
            e != ConvError::kOk)
            return set_error(env, "recv of the answer", e);
        ++env.result.received;
        block_ns.push_back(now_ns() - t0);
        elapsed += block_ns.back();
        if (turns != nullptr) pass_turn(*turns);
    }
    if (turns != nullptr) wait_turn(*turns, p.turn_runs * blocks, conv);
    if (!p.result_file.empty())
        if (FILE* f = std::fopen(p.result_file.c_str(), "w")) {
            std::fprintf(f, "stream_ns %llu %llu\n", static_cast<unsigned long long>(elapsed),
                         static_cast<unsigned long long>(per_block * blocks));
            if (turns != nullptr) {
                std::fprintf(f, "stream_block_ns");
                for (const uint64_t t : block_ns) std::fprintf(f, " %llu", static_cast<unsigned long long>(t));
                std::fprintf(f, "\n");
            }
            std::fclose(f);
        }
    conv.close(c, 10'000'000);
    return true;
}

}  // namespace iccs
