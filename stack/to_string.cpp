// to_string.cpp: human-readable forms of the wire headers, for logs and test failure messages.
#include <cstdio>
#include <string>

#include "arp_hdr.hpp"
#include "eth_hdr.hpp"
#include "ipv4_hdr.hpp"
#include "slidwin_hdr.hpp"
#include "udp_hdr.hpp"

namespace iccs {

std::string to_string(const MacAddr& m) {
    char s[18];
    std::snprintf(s, sizeof s, "%02x:%02x:%02x:%02x:%02x:%02x", m.b[0], m.b[1], m.b[2], m.b[3], m.b[4], m.b[5]);
    return s;
}

bool parse_mac(const std::string& s, MacAddr& out) {
    unsigned v[6];
    char tail;
    if (std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
        return false;
    if (s.size() != 17) return false;
    for (int i = 0; i < 6; ++i) out.b[i] = static_cast<uint8_t>(v[i]);
    return true;
}

std::string to_string(Ipv4Addr a) {
    char s[16];
    std::snprintf(s, sizeof s, "%u.%u.%u.%u", a.v >> 24, (a.v >> 16) & 0xff, (a.v >> 8) & 0xff, a.v & 0xff);
    return s;
}

bool parse_ipv4(const std::string& s, Ipv4Addr& out) {
    uint32_t v = 0;
    int parts = 0;
    size_t i = 0;
    while (parts < 4) {
        if (i >= s.size() || s[i] < '0' || s[i] > '9') return false;
        uint32_t octet = 0;
        size_t digits = 0;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
            octet = octet * 10 + static_cast<uint32_t>(s[i] - '0');
            if (++digits > 3 || octet > 255) return false;
            ++i;
        }
        v = (v << 8) | octet;
        if (++parts < 4) {
            if (i >= s.size() || s[i] != '.') return false;
            ++i;
        }
    }
    if (i != s.size()) return false;
    out.v = v;
    return true;
}

std::string to_string(const EthHdr& h) {
    char s[96];
    std::snprintf(s, sizeof s, "eth %s > %s type 0x%04x", to_string(h.src).c_str(), to_string(h.dst).c_str(),
                  h.ethertype.get());
    return s;
}

std::string to_string(const ArpHdr& h) {
    char s[160];
    std::snprintf(s, sizeof s, "arp %s who-has %s tell %s (%s) tha %s",
                  h.op.get() == kArpOpRequest ? "request" : (h.op.get() == kArpOpReply ? "reply" : "op?"),
                  to_string(Ipv4Addr{h.tpa.get()}).c_str(), to_string(Ipv4Addr{h.spa.get()}).c_str(),
                  to_string(h.sha).c_str(), to_string(h.tha).c_str());
    return s;
}

std::string to_string(const Ipv4Hdr& h) {
    char s[160];
    std::snprintf(s, sizeof s, "ipv4 %s > %s len %u id %u off %u%s%s ttl %u proto %u csum 0x%04x",
                  to_string(Ipv4Addr{h.src.get()}).c_str(), to_string(Ipv4Addr{h.dst.get()}).c_str(),
                  h.total_len.get(), h.id.get(), h.frag_off_bytes(), h.more_frags() ? " MF" : "",
                  (h.frag.get() & kIpFlagDF) ? " DF" : "", h.ttl, h.proto, h.csum.get());
    return s;
}

std::string to_string(const UdpHdr& h) {
    char s[80];
    std::snprintf(s, sizeof s, "udp %u > %u len %u csum 0x%04x", h.src_port.get(), h.dst_port.get(), h.len.get(),
                  h.csum.get());
    return s;
}

std::string to_string(const SlidwinHdr& h) {
    char s[240];
    std::snprintf(s, sizeof s, "slidwin v%u sc %u%s%s%s%s%s%s seq %u ack %u wnd %u sack 0x%016llx tsval %u%s%u token 0x%016llx",
                  h.version, h.subconn.get(), (h.flags & kSwSyn) ? " SYN" : "", (h.flags & kSwData) ? " DATA" : "",
                  (h.flags & kSwAck) ? " ACK" : "", (h.flags & kSwAckReq) ? " ACKREQ" : "",
                  (h.flags & kSwRetx) ? " RETX" : "", (h.flags & kSwAuth) ? ((h.flags & kSwEnc) ? " AUTH ENC" : " AUTH") : "",
                  h.seq.get(), h.ack.get(), h.wnd.get(),
                  static_cast<unsigned long long>(h.sack.get()), h.tsval.get(),
                  (h.flags & kSwTsEcr) ? " tsecr " : " tsecr-none ", h.tsecr.get(),
                  static_cast<unsigned long long>(h.token.get()));
    return s;
}

std::string to_string(const SlidwinSynBlk& b) {
    char s[80];
    std::snprintf(s, sizeof s, "syn nonce 0x%016llx echo 0x%016llx", static_cast<unsigned long long>(b.nonce.get()),
                  static_cast<unsigned long long>(b.echo.get()));
    return s;
}

}  // namespace iccs

#include "conv_hdr.hpp"

namespace iccs {

const char* to_string(ConvType t) {
    switch (t) {
        case ConvType::kData: return "DATA";
        case ConvType::kConnect: return "CONNECT";
        case ConvType::kAccept: return "ACCEPT";
        case ConvType::kRefuse: return "REFUSE";
        case ConvType::kClose: return "CLOSE";
        case ConvType::kCredit: return "CREDIT";
        case ConvType::kProxyStatus: return "PROXY-STATUS";
        case ConvType::kBundle: return "BUNDLE";
    }
    return "?";
}

std::string to_string(const ConvHdr& h) {
    char s[200];
    std::snprintf(s, sizeof s, "conv %s%s %u:%u > %u:%u conn %u cseq %u msg %u piece %u/%u len %u enq %llu",
                  to_string(static_cast<ConvType>(h.type)), (h.flags & kConvOrdered) ? " ORD" : "",
                  h.src_cluster.get(), h.src_port.get(), h.dst_cluster.get(), h.dst_port.get(), h.conn_id.get(),
                  h.conn_seq.get(), h.msg_id.get(), h.piece_idx.get(), h.piece_cnt.get(), h.msg_len.get(),
                  static_cast<unsigned long long>(h.enq_ns.get()));
    return s;
}

}  // namespace iccs
