// slidwin_endpoint.hpp: binds sub-connections to one UDP port of a DatagramService (our Stack,
// or the kernel's UDP socket through io_uring: datagram_service.hpp).
//
// The datagram's subconn field is the receiver's index of the sub-connection (like a queue-pair
// number), so demultiplexing is one array load plus a check that the source address and port
// are the ones the sub-connection was opened with. Acks owed at the end of an input burst are
// sent once per sub-connection from end_of_burst().
// With a key (SlidwinConfig::auth) the endpoint seals every datagram a sub-connection sends and
// opens every one it receives before slidwin sees it (slidwin_auth.hpp): a frame that does not
// verify is dropped and counted (drop_auth) before it can touch any state. A frame whose token is
// neither the peer's nor a pending restart's is not worth a tag check: drop_token (or
// drop_unsynced before the handshake), as slidwin would count it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "datagram_service.hpp"
#include "slidwin.hpp"

namespace iccs {

// Receives the in-order messages of every sub-connection of an endpoint.
struct SlidwinSink {
    virtual ~SlidwinSink() = default;
    // msg: data() at the first payload byte. Return false to refuse it for now (see SlidwinLink).
    virtual bool on_message(SubConnection& sc, PktBuf* msg) = 0;
    // The peer of sc came back with a new run token (slidwin.hpp): treat it as gone.
    virtual void on_peer_restarted(SubConnection& sc, uint64_t new_token) { (void)sc, (void)new_token; }
};

class SlidwinEndpoint final : public UdpHandler, public SlidwinLink {
   public:
    SlidwinEndpoint(DatagramService& service, TimerWheel& wheel, uint16_t port, const SlidwinConfig& cfg,
                    SlidwinSink& sink);
    ~SlidwinEndpoint() override;

    // Open sub-connection `local_id` to (remote_ip, remote_port), whose end is `remote_id` there,
    // and start its handshake (the first SYN goes out now). Returns nullptr if local_id is taken.
    SubConnection* open(uint16_t local_id, Ipv4Addr remote_ip, uint16_t remote_port, uint16_t remote_id,
                        uint64_t now_ns);
    SubConnection* get(uint16_t local_id) const;
    uint16_t port() const { return port_; }
    DatagramService& service() { return service_; }
    // Datagrams for no open sub-connection, or from the wrong address.
    uint64_t drop_unknown_subconn() const { return drop_unknown_; }

    // UdpHandler
    void udp_deliver(PktBuf* payload, const UdpMeta& meta, uint64_t now_ns) override;
    void end_of_burst(uint64_t now_ns) override;
    // SlidwinLink
    void slidwin_transmit(SubConnection& sc, PktBuf* dgram) override;
    bool slidwin_deliver(SubConnection& sc, PktBuf* msg) override;
    void slidwin_peer_restarted(SubConnection& sc, uint64_t new_token) override;

   private:
    struct Peer {
        std::unique_ptr<SubConnection> sc;
        Ipv4Addr ip;
        uint16_t port = 0;
        bool dirty = false;  // received something this burst
        // authentication (cfg_.auth): keys made when first needed; the counter is the GCM nonce
        std::unique_ptr<SlidwinCipher> tx_syn, tx, rx;
        uint64_t tx_counter = 0;
    };
    // Verify (and decrypt) a received datagram of peer p; false: dropped and counted (consumed).
    [[gnu::noinline]] bool authentic(Peer& p, PktBuf* dgram);
    // Seal a datagram sc sends with peer p's keys; false: dropped (consumed).
    [[gnu::noinline]] bool sealed(Peer& p, SubConnection& sc, PktBuf* dgram);
    DatagramService& service_;
    TimerWheel& wheel_;
    uint16_t port_;
    SlidwinConfig cfg_;
    SlidwinSink& sink_;
    std::vector<Peer> peers_;  // indexed by local id
    std::vector<uint16_t> dirty_;
    uint64_t drop_unknown_ = 0;
};

}  // namespace iccs
