// proxy_wan.cpp: a proxy's WAN stage (proxy.hpp, wan_emu.hpp): frames held until their emulated
// arrival, losses, the links' parameters changed by commands, and the view telemetry reads.
#include "proxy_impl.hpp"

#include <algorithm>

namespace iccs {

uint32_t Proxy::wan_poll(uint64_t now_ns) {
    if (wan_cmd_pending_.load(std::memory_order_acquire)) {
        std::vector<WanCommand> cmds;
        {
            std::lock_guard<std::mutex> lock(wan_cmd_mu_);
            cmds.swap(wan_cmds_);
            wan_cmd_pending_.store(false, std::memory_order_relaxed);
        }
        for (const WanCommand& c : cmds) {
            if (c.kind == WanCommand::kMode) {
                wan_->set_mode(c.mode, now_ns);
                continue;
            }
            if (c.a >= wan_->topology().sites || c.b >= wan_->topology().sites) continue;
            WanLinkParams p = wan_->topology().at(c.a, c.b);
            if (c.kind == WanCommand::kSet) {
                const double loss = p.loss;
                p = c.params;
                p.loss = loss;
            } else {
                p.loss = c.params.loss;
            }
            wan_->set_link(c.a, c.b, p, now_ns);
        }
    }
    wan_->drive(now_ns);
    uint32_t work = 0;
    uint16_t site = 0;
    // Due messages in arrival order; a full ring stops its source site's queue until next time.
    for (void* m; (m = wan_->peek_due(now_ns, site)) != nullptr;) {
        if (!deliver(nullptr, static_cast<PktBuf*>(m))) break;
        wan_->pop(site);
        ++wan_released_;
        ++work;
    }
    wan_held_.store(wan_->held_msgs(), std::memory_order_relaxed);
    if (now_ns - last_wan_publish_ns_ >= 10'000'000) {
        wan_publish();
        last_wan_publish_ns_ = now_ns;
    }
    return work;
}

uint32_t Proxy::wan_lose_burst(PktBuf** frames, uint32_t n, bool datagrams) {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; ++i) {
        PktBuf* f = frames[i];
        // The sender's IPv4 address: the socket's (fabric udp), or the IPv4 header's (not ARP).
        // Fabric udp: every socket may share one address, so its port names the proxy too.
        uint32_t src_be = 0;
        uint16_t port = 0;
        bool ip = false;
        if (datagrams) {
            ip = f->data_len >= kDgramAddrLen;
            if (ip) {
                std::memcpy(&src_be, f->data() + offsetof(DgramAddrHdr, src_ip_be), 4);
                port = load_be16(f->data() + offsetof(DgramAddrHdr, src_port_be));
            }
        } else {
            ip = f->data_len >= 14 + 20 && load_be16(f->data() + 12) == 0x0800;
            if (ip) std::memcpy(&src_be, f->data() + 14 + 12, 4);
        }
        if (ip) {
            const uint32_t src = __builtin_bswap32(src_be);
            for (const ProxyAddr& peer : cfg_.peers)
                if (peer.ip.v == src && (!datagrams || peer.udp_port == port)) {
                    if (wan_->remote(peer.cluster) && wan_->lose(wan_->site_of(peer.cluster))) {
                        pkt_free(f);
                        f = nullptr;
                    }
                    break;
                }
        }
        if (f != nullptr) frames[kept++] = f;
    }
    return kept;
}

void Proxy::wan_publish() {
    std::unique_lock<std::mutex> lock(wan_view_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return;  // a reader is copying it: next time
    WanView& v = wan_view_;
    v.on = true;
    v.mode = wan_->mode();
    v.sites = wan_->topology().sites;
    v.my_site = wan_->my_site();
    v.held_msgs = wan_->held_msgs();
    v.held_bytes = wan_->held_bytes();
    v.held_max_msgs = wan_held_max_;
    v.hold_full = wan_hold_full_;
    v.released = wan_released_;
    v.links.clear();
    for (const auto& [a, b] : wan_->used_links())
        v.links.push_back(WanView::Link{a, b, wan_->topology().at(a, b), wan_->counters(a, b)});
    v.changes.assign(wan_->changes().begin(), wan_->changes().end());
}

bool Proxy::wan_post(const WanCommand& c) {
    if (!wan_) return false;
    std::lock_guard<std::mutex> lock(wan_cmd_mu_);
    wan_cmds_.push_back(c);
    wan_cmd_pending_.store(true, std::memory_order_release);
    rings_.proxy_waker(cfg_.index).wake();
    return true;
}

WanView Proxy::wan_view() const {
    std::lock_guard<std::mutex> lock(wan_view_mu_);
    return wan_view_;
}

}  // namespace iccs
