// slidwin_endpoint.hpp: binds sub-connections to one UDP port of a DatagramService (our Stack,
// or the kernel's UDP socket through io_uring: datagram_service.hpp).
//
// The datagram's subconn field is the receiver's index of the sub-connection (like a queue-pair
// number), so demultiplexing is one array load plus a check that the source address and port
// are the ones the sub-connection was opened with. Acks owed at the end of an input burst are
// sent once per sub-connection from end_of_burst().
// With a key (SlidwinConfig::auth) the endpoint seals every datagram a sub-connection sends and
// opens every one it receives before slidwin sees it (slidwin_auth.hpp): a frame that does not
// verify is dropped and counted (drop_auth), one whose counter was seen under its key or is too
// old is a replay (drop_replay), both before they can touch any state. Keys are derived when
// the sub-connection opens (its own SYN key) or when a sender token first shows up in a
// handshake datagram, never per datagram: each sub-connection keeps the keys of three sender
// tokens (its peer's, a pending restart's, one more), each with its epoch and anti-replay
// window, and a key for an unknown token costs a unit of the handshake budget (slidwin.hpp;
// beyond it: drop_handshake_rate). A non-handshake frame of an unknown token is not worth a
// set-up: drop_token (or drop_unsynced before the handshake), as slidwin would count it. Every
// cipher context is allocated when the sub-connection opens; none on the datagram path.
// With encryption a retransmission is sealed into a copy (SlidwinCipher::seal_copy): the
// datagram slidwin keeps, which a queued fragment of the last transmission may still view, is
// never decrypted back in place; no buffer for the copy is a counted drop (drop_tx_nobuf).
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
    void slidwin_transmit_handshake(SubConnection& sc, PktBuf* dgram, uint64_t to_token) override;
    bool slidwin_deliver(SubConnection& sc, PktBuf* msg) override;
    void slidwin_peer_restarted(SubConnection& sc, uint64_t new_token) override;

   private:
    // One sender token's key of one use, for receiving: the epoch in use and a spare (the next
    // epoch's key, or a first key not yet verified: nothing is committed before a tag verifies).
    struct RxKey {
        SlidwinCipher c[2];
        uint32_t epoch[2] = {0, 0};
        bool has[2] = {false, false};
        uint8_t cur = 0;
        bool committed = false;
        SlidwinReplayWindow window;
    };
    struct SenderKeys {
        uint64_t token = 0;  // 0: unused
        uint64_t used = 0;   // last use (for eviction)
        RxKey syn, data;
    };
    // One key for sending: to_token is the receiver's token (0: a plain SYN's key).
    struct TxKey {
        SlidwinCipher c;
        uint64_t to_token = 0;
        uint32_t epoch = 0;
        bool has = false;
    };
    struct PeerKeys {
        TxKey syn, data, other;  // data: to the peer's token; other: a challenge to a pending one
        SenderKeys from[3];
        uint64_t tx_counter = 0;  // every datagram sealed, whatever the key: the GCM nonce
        uint64_t tick = 0;
    };
    struct Peer {
        std::unique_ptr<SubConnection> sc;
        Ipv4Addr ip;
        uint16_t port = 0;
        bool dirty = false;  // received something this burst
        std::unique_ptr<PeerKeys> keys;  // with authentication
    };
    // Verify (and decrypt) a received datagram of peer p; false: dropped and counted (consumed).
    [[gnu::noinline]] bool authentic(Peer& p, PktBuf* dgram, uint64_t now_ns);
    // Seal a datagram sc sends to to_token with peer p's keys; null: dropped (consumed). With
    // encryption a retransmission comes back as a sealed copy (the original is released).
    [[gnu::noinline]] PktBuf* sealed(Peer& p, PktBuf* dgram, uint64_t to_token);
    // The cipher of k for epoch e (deriving it when needed), or null: an epoch k has left behind.
    SlidwinCipher* rx_cipher(Peer& p, RxKey& k, SlidwinKeyUse use, uint64_t token, uint32_t epoch, bool& spare);
    bool tx_key(Peer& p, TxKey& k, SlidwinKeyUse use, uint64_t to_token, uint32_t epoch);
    SenderKeys* sender_keys(Peer& p, uint64_t token, bool make);
    DatagramService& service_;
    TimerWheel& wheel_;
    uint16_t port_;
    SlidwinConfig cfg_;
    SlidwinSink& sink_;
    std::vector<Peer> peers_;  // indexed by local id
    std::unique_ptr<SlidwinKdf> kdf_;  // with authentication: this thread's key derivation
    uint32_t replay_bits_ = 0;
    std::vector<uint16_t> dirty_;
    uint64_t drop_unknown_ = 0;
};

}  // namespace iccs
