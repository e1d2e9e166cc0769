// conv_connect.cpp: a convergence module's connections made and ended (convergence.hpp): the
// module's set-up and teardown, listening, accepting, a CONNECT received (accepted or refused),
// connecting, and closing; the data path (send, recv, poll, credit, waiting) is convergence.cpp.
#include "convergence.hpp"

#include <algorithm>
#include <cstring>

#include "clock.hpp"

namespace iccs {

Convergence::Convergence(const ConvNet& net, uint16_t thread, const ConvConfig& cfg)
    : net_(net), thread_(thread), cfg_(cfg), packet_budget_(cfg.zero_copy_packets) {
    threshold_ = cfg_.stripe_threshold_bytes != 0 ? cfg_.stripe_threshold_bytes
                                                  : default_stripe_threshold(net_.mtu_bytes);
    ds_.thread = thread;
    ds_.proxies = static_cast<uint16_t>(std::max<uint32_t>(1, net_.rings->proxies()));
    ds_.rr = static_cast<uint16_t>(thread % ds_.proxies);
    next_msg_id_ = uint32_t{thread} << 24;  // distinct per thread in traces
    if (net_.bulk_pool != nullptr) payload_pool_.emplace(*net_.bulk_pool, *net_.pool);
}

Convergence::~Convergence() {
    // Tell the peers of what is still open (no waiting), so their recv ends instead of hanging.
    while (!owned_.empty()) {
        Connection* c = owned_.back().get();
        if (c->state_ == Connection::State::kOpen && !net_.rings->cluster_down(c->remote_.cluster)) {
            ConvCreditBody b{be64::of(c->rx_.bytes_taken()), be32::of(c->rx_.credit_msgs())};
            send_control(*c, ConvType::kClose, &b, sizeof b, c->next_seq_);
        }
        destroy(c);
    }
    for (const Listener& l : listeners_) net_.rings->port_unbind(l.port);
}

void Convergence::on_connect(PktBuf* m, const ConvHdr& h) {
    const uint16_t port = h.dst_port.get();
    const Endpoint remote{h.src_cluster.get(), h.src_port.get()};
    const uint32_t conn_id = h.conn_id.get();
    ConvConnectBody b{};
    if (m->data_len >= kConvHdrLen + sizeof b) b = load_hdr<ConvConnectBody>(m->data() + kConvHdrLen);
    pkt_free(m);
    auto l = std::find_if(listeners_.begin(), listeners_.end(), [&](const Listener& x) { return x.port == port; });
    uint32_t reason = 0;
    if (l == listeners_.end()) reason = kRefuseNoListener;
    else if (l->ready.size() >= cfg_.accept_backlog) reason = kRefuseBacklogFull;
    const auto it = conns_.find(key(port, remote.cluster, remote.port));
    if (it != conns_.end()) {
        if (it->second->conn_id_ == conn_id) return;  // already accepted
        reason = kRefuseBacklogFull;                  // the old connection on these ports is still open
    }
    if (reason != 0) {
        // A one-off connection object carries the refusal back.
        Connection tmp(true, 1, 0, nullptr);
        tmp.local_ = {net_.cluster, port};
        tmp.remote_ = remote;
        tmp.conn_id_ = conn_id;
        const be32 r = be32::of(reason);
        send_control(tmp, ConvType::kRefuse, &r, sizeof r);
        return;
    }
    const bool ordered = h.flags & kConvOrdered;
    owned_.push_back(std::unique_ptr<Connection>(new Connection(ordered, cfg_.window_msgs, cfg_.window_bytes, &packet_budget_)));
    Connection* c = owned_.back().get();
    c->local_ = {net_.cluster, port};
    c->remote_ = remote;
    c->conn_id_ = conn_id;
    c->ordered_ = ordered;
    c->dispatch_ = cfg_.dispatch;
    c->accepted_ = true;
    c->state_ = Connection::State::kOpen;
    c->peer_window_bytes_ = b.window_bytes.get();
    c->peer_window_msgs_ = b.window_msgs.get();
    c->my_window_bytes_ = cfg_.window_bytes;
    c->my_window_msgs_ = cfg_.window_msgs;
    conns_[key(port, remote.cluster, remote.port)] = c;
    ConvConnectBody mine{be32::of(cfg_.window_bytes), be32::of(cfg_.window_msgs)};
    send_control(*c, ConvType::kAccept, &mine, sizeof mine);
    l->ready.push_back(c);
}

ConvError Convergence::listen(uint16_t port) {
    for (const Listener& l : listeners_)
        if (l.port == port) return ConvError::kOk;
    if (!net_.rings->port_bind(port, thread_)) {
        const int32_t owner = net_.rings->port_owner(port);
        return fail(ConvError::kPortInUse, "port " + std::to_string(port) + " of cluster " +
                                               std::to_string(net_.cluster) + " is bound by compute thread " +
                                               std::to_string(owner));
    }
    listeners_.push_back(Listener{port, {}});
    return ConvError::kOk;
}

void Convergence::unlisten(uint16_t port) {
    auto l = std::find_if(listeners_.begin(), listeners_.end(), [&](const Listener& x) { return x.port == port; });
    if (l == listeners_.end()) return;
    for (Connection* c : std::vector<Connection*>(l->ready)) {
        ConvCreditBody b{be64::of(0), be32::of(0)};
        send_control(*c, ConvType::kClose, &b, sizeof b, 0);  // never accepted: the peer learns it
        destroy(c);
    }
    listeners_.erase(l);
    bool used = false;
    for (const auto& [k, c] : conns_) used |= c->local_.port == port;
    if (!used) net_.rings->port_unbind(port);
}

ConvError Convergence::accept(uint16_t port, Connection*& out, int64_t timeout_us) {
    auto find = [&] {
        return std::find_if(listeners_.begin(), listeners_.end(), [&](const Listener& x) { return x.port == port; });
    };
    if (find() == listeners_.end())
        return fail(ConvError::kBadArgument, "accept on port " + std::to_string(port) + ", which this thread does not listen on");
    const uint64_t start = now_ns(), dl = deadline(timeout_us);
    const Unwatch unwatch{*this};  // the wait loop below ends watching (assist)
    while (true) {
        progress();
        auto l = find();
        if (!l->ready.empty()) {
            out = l->ready.front();
            l->ready.erase(l->ready.begin());
            return ConvError::kOk;
        }
        if (now_ns() >= dl)
            return timeout_us == 0 ? fail(ConvError::kWouldBlock, "no connection waiting on port " + std::to_string(port))
                                   : fail(ConvError::kTimeout, "no connection to port " + std::to_string(port) +
                                                                   " within " + std::to_string(timeout_us) + " us");
        wait_some(start, dl);
    }
}

ConvError Convergence::connect(Endpoint remote, Connection*& out, const ConnOptions& o, int64_t timeout_us) {
    out = nullptr;
    if (remote.cluster >= net_.clusters)
        return fail(ConvError::kBadArgument, "no cluster " + std::to_string(remote.cluster) + " in this machine (it has " +
                                                 std::to_string(net_.clusters) + ")");
    if (remote.cluster == net_.cluster)
        return fail(ConvError::kBadArgument, "cluster " + std::to_string(remote.cluster) +
                                                 " is this thread's own cluster: its threads share memory; "
                                                 "connections go between clusters");
    if (net_.rings->cluster_down(remote.cluster))
        return fail(ConvError::kPeerDown, "cluster " + std::to_string(remote.cluster) + " is down");
    const uint16_t port = net_.rings->port_bind_ephemeral(thread_);
    if (port == 0) return fail(ConvError::kPortInUse, "no free local port for a connection");
    const bool ordered = o.order == ConnOptions::Order::kDefault ? cfg_.ordered : o.order == ConnOptions::Order::kOrdered;
    owned_.push_back(std::unique_ptr<Connection>(new Connection(ordered, cfg_.window_msgs, cfg_.window_bytes, &packet_budget_)));
    Connection* c = owned_.back().get();
    c->local_ = {net_.cluster, port};
    c->remote_ = remote;
    // Different for every connection of the machine in practice: a connection that reuses the
    // ports of an old one never takes the old one's late pieces.
    c->conn_id_ = static_cast<uint32_t>(now_ns() * 2654435761u) ^ (uint32_t{net_.cluster} << 24) ^
                  (uint32_t{thread_} << 16) ^ port;
    c->ordered_ = ordered;
    c->dispatch_ = o.dispatch_set ? o.dispatch : cfg_.dispatch;
    c->owns_port_ = true;
    c->my_window_bytes_ = cfg_.window_bytes;
    c->my_window_msgs_ = cfg_.window_msgs;
    conns_[key(port, remote.cluster, remote.port)] = c;
    ConvConnectBody b{be32::of(cfg_.window_bytes), be32::of(cfg_.window_msgs)};
    send_control(*c, ConvType::kConnect, &b, sizeof b);
    const int64_t t = timeout_us == kDefaultTimeout ? int64_t{cfg_.connect_timeout_ms} * 1000 : timeout_us;
    const uint64_t start = now_ns(), dl = deadline(t);
    const Unwatch unwatch{*this};  // the wait loop below ends watching (assist)
    while (c->state_ == Connection::State::kConnecting) {
        progress();
        if (c->state_ != Connection::State::kConnecting) break;
        if (net_.rings->cluster_down(remote.cluster)) {
            destroy(c);
            return fail(ConvError::kPeerDown, "cluster " + std::to_string(remote.cluster) +
                                                  " stopped answering while connecting to " + to_string(remote));
        }
        if (now_ns() >= dl) {
            destroy(c);
            return fail(ConvError::kTimeout, "no answer from " + to_string(remote) + " within " + std::to_string(t / 1000) +
                                                 " ms (is that cluster running?)");
        }
        wait_some(start, dl);
    }
    if (c->state_ == Connection::State::kRefused) {
        const uint32_t why = c->refuse_reason_;
        destroy(c);
        return fail(ConvError::kRefused,
                    "connection to " + to_string(remote) + " refused: " +
                        (why == kRefuseBacklogFull ? "its accept backlog is full (or an old connection holds these ports)"
                                                   : "no compute thread listens on that port"));
    }
    out = c;
    return ConvError::kOk;
}

ConvError Convergence::connect(std::span<const Ipv4Addr> ni_addrs, uint16_t port, Connection*& out,
                               const ConnOptions& o, int64_t timeout_us) {
    out = nullptr;
    if (ni_addrs.empty()) return fail(ConvError::kBadArgument, "connect by address: no NI addresses given");
    for (uint16_t c = 0; c < net_.ni_addrs.size(); ++c) {
        const auto& mine = net_.ni_addrs[c];
        const bool all = std::all_of(ni_addrs.begin(), ni_addrs.end(), [&](Ipv4Addr a) {
            return std::find(mine.begin(), mine.end(), a) != mine.end();
        });
        if (all) return connect(Endpoint{c, port}, out, o, timeout_us);
    }
    return fail(ConvError::kUnsupported,
                "the NI address " + to_string(ni_addrs[0]) +
                    " belongs to no cluster of this logical machine; connecting across logical machines "
                    "(sub-connections set up on demand) is not built yet");
}

ConvError Convergence::close(Connection* c, int64_t timeout_us, uint64_t* unsent) {
    if (unsent != nullptr) *unsent = 0;
    if (c == nullptr) return fail(ConvError::kBadArgument, "no connection (nullptr)");
    if (c->state_ == Connection::State::kClosed)
        return fail(ConvError::kClosed, "the connection to " + to_string(c->remote_) + " is already closed");
    ConvError result = ConvError::kOk;
    if (c->state_ == Connection::State::kOpen && !net_.rings->cluster_down(c->remote_.cluster)) {
        ConvCreditBody b{be64::of(c->rx_.bytes_taken()), be32::of(c->rx_.credit_msgs())};
        send_control(*c, ConvType::kClose, &b, sizeof b, c->next_seq_);
        c->state_ = Connection::State::kClosed;
        const uint64_t start = now_ns(), dl = deadline(timeout_us);
        const Unwatch unwatch{*this};  // the wait loop below ends watching (assist)
        while (c->peer_credit_msgs_ != c->next_seq_ && !c->peer_closed_) {
            progress();
            if (c->peer_credit_msgs_ == c->next_seq_ || c->peer_closed_) break;
            if (net_.rings->cluster_down(c->remote_.cluster)) {
                result = fail(ConvError::kPeerDown, "cluster " + std::to_string(c->remote_.cluster) +
                                                        " went down before it took everything sent to it");
                break;
            }
            if (now_ns() >= dl) {
                result = fail(ConvError::kTimeout, to_string(c->remote_) + " had not taken every message when close timed out");
                break;
            }
            ask_credit(*c);
            wait_some(start, dl);
        }
        // The peer may have closed first without taking everything: reported, not an error.
        if (unsent != nullptr) *unsent = c->next_seq_ - c->peer_credit_msgs_;
    } else if (net_.rings->cluster_down(c->remote_.cluster)) {
        if (unsent != nullptr) *unsent = c->next_seq_ - c->peer_credit_msgs_;
        if (c->next_seq_ != c->peer_credit_msgs_)
            result = fail(ConvError::kPeerDown, "cluster " + std::to_string(c->remote_.cluster) + " is down");
    }
    destroy(c);
    return result;
}

void Convergence::destroy(Connection* c) {
    const auto it = conns_.find(key(c->local_.port, c->remote_.cluster, c->remote_.port));
    if (it != conns_.end() && it->second == c) conns_.erase(it);
    for (Listener& l : listeners_) std::erase(l.ready, c);
    if (c->owns_port_) net_.rings->port_unbind(c->local_.port);
    std::erase_if(owned_, [c](const std::unique_ptr<Connection>& p) { return p.get() == c; });
}

}  // namespace iccs
