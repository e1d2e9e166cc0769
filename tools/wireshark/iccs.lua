-- iccs.lua: a Wireshark/tshark dissector for the iccs headers that follow UDP (DESIGN.md §3):
-- the slidwin header (40 bytes, version 3: sub-connection, seq, cumulative ack, SACK bitmap,
-- window, flags (SYN for the handshake), timestamps, the sender's sub-connection token; with a
-- key, the 24-byte auth block: counter and AES-GCM tag; on a SYN, the 16-byte handshake block:
-- the sender's nonce and the echo of the peer's) and, on data datagrams, the convergence header (40 bytes: clusters, ports, type,
-- connection id and seq, message id, piece index/count, length, enqueue time) and its body.
-- One slidwin datagram carries at most one convergence message (stack/slidwin_hdr.hpp).
--
-- Load it:   tshark -X lua_script:tools/wireshark/iccs.lua -r cluster0-proxy0.pcapng
--            Wireshark: copy to ~/.local/lib/wireshark/plugins/ (or Help > About > Folders >
--            Personal Lua Plugins), or `wireshark -X lua_script:tools/wireshark/iccs.lua`.
-- UDP port:  preference "iccs.udp_port" (default 9410, [machine] udp_port), e.g.
--            tshark -o iccs.udp_port:9500 ...; "Decode As..." works too.
-- Filters:   iccs, iccs.seq, iccs.ack, iccs.subconn, iccs.flags.retx, iccs.retransmission,
--            iccs.conv.type, iccs.conv.conn_seq, iccs.conv.piece_idx, ... (see the fields below).
-- Retransmissions are flagged twice: the RETX flag the sender sets (iccs.flags.retx), and a seq
-- seen before in the same direction of the same sub-connection (iccs.retransmission, with the
-- frame that first carried it in iccs.retransmission_of); both add expert info (Sequence, Note).
-- IPv4 fragments: Wireshark reassembles them (ip.defragment, on by default), so the dissector
-- sees whole datagrams; a datagram with a fragment missing from the capture is not decoded.

local iccs = Proto("iccs", "iccs sliding window")
local conv = Proto("iccsconv", "iccs convergence")

local band = (bit and bit.band) or (bit32 and bit32.band)

-- slidwin (stack/slidwin_hdr.hpp)
local SW_DATA, SW_ACK, SW_ACKREQ, SW_RETX, SW_TSECR, SW_SYN = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
local SW_AUTH, SW_ENC = 0x40, 0x80
local SW_VERSION, SW_LEN, AUTH_LEN, SYN_LEN, CONV_LEN = 3, 40, 24, 16, 40
local f = iccs.fields
f.version = ProtoField.uint8("iccs.version", "Version", base.DEC)
f.flags = ProtoField.uint8("iccs.flags", "Flags", base.HEX)
f.flag_data = ProtoField.bool("iccs.flags.data", "DATA", 8, nil, SW_DATA)
f.flag_ack = ProtoField.bool("iccs.flags.ack", "ACK", 8, nil, SW_ACK)
f.flag_ackreq = ProtoField.bool("iccs.flags.ackreq", "ACKREQ (window probe)", 8, nil, SW_ACKREQ)
f.flag_retx = ProtoField.bool("iccs.flags.retx", "RETX", 8, nil, SW_RETX)
f.flag_tsecr = ProtoField.bool("iccs.flags.tsecr", "TSECR valid", 8, nil, SW_TSECR)
f.flag_syn = ProtoField.bool("iccs.flags.syn", "SYN (handshake)", 8, nil, SW_SYN)
f.flag_auth = ProtoField.bool("iccs.flags.auth", "AUTH (auth block follows)", 8, nil, SW_AUTH)
f.flag_enc = ProtoField.bool("iccs.flags.enc", "ENC (payload encrypted)", 8, nil, SW_ENC)
f.auth_counter = ProtoField.uint64("iccs.auth.counter", "Auth counter (GCM nonce)", base.DEC)
f.auth_tag = ProtoField.bytes("iccs.auth.tag", "Auth tag (AES-128-GCM)")
f.encrypted = ProtoField.bytes("iccs.encrypted", "Encrypted payload")
f.subconn = ProtoField.uint16("iccs.subconn", "Sub-connection", base.DEC)
f.seq = ProtoField.uint32("iccs.seq", "Sequence number", base.DEC)
f.ack = ProtoField.uint32("iccs.ack", "Cumulative ack", base.DEC)
f.wnd = ProtoField.uint16("iccs.wnd", "Window [datagrams]", base.DEC)
f.reserved = ProtoField.uint16("iccs.reserved", "Reserved", base.HEX)
f.sack = ProtoField.uint64("iccs.sack", "SACK bitmap", base.HEX)
f.tsval = ProtoField.uint32("iccs.tsval", "Timestamp value [us]", base.DEC)
f.tsecr = ProtoField.uint32("iccs.tsecr", "Timestamp echo reply [us]", base.DEC)
f.token = ProtoField.uint64("iccs.token", "Token (sender's sub-connection)", base.HEX)
f.syn_nonce = ProtoField.uint64("iccs.syn.nonce", "Handshake nonce (sender's; a restart challenge)", base.HEX)
f.syn_echo = ProtoField.uint64("iccs.syn.echo", "Handshake echo (the receiver's nonce)", base.HEX)
f.retx = ProtoField.bool("iccs.retransmission", "Retransmission (seq seen before)")
f.retx_of = ProtoField.framenum("iccs.retransmission_of", "First sent in frame")

local e_retx_flag = ProtoExpert.new("iccs.retx_flag.expert", "Retransmission (RETX flag)",
                                    expert.group.SEQUENCE, expert.severity.NOTE)
local e_retx_seen = ProtoExpert.new("iccs.retx_seen.expert", "Sequence number seen before",
                                    expert.group.SEQUENCE, expert.severity.NOTE)
local e_version = ProtoExpert.new("iccs.version.expert", "Unknown slidwin version (this dissector reads 3)",
                                  expert.group.MALFORMED, expert.severity.ERROR)
iccs.experts = { e_retx_flag, e_retx_seen, e_version }

-- convergence (stack/conv_hdr.hpp)
local conv_types = { [1] = "DATA", [2] = "CONNECT", [3] = "ACCEPT", [4] = "REFUSE", [5] = "CLOSE",
                     [6] = "CREDIT", [7] = "PROXY-STATUS", [8] = "BUNDLE" }
local refuse_reasons = { [1] = "no listener", [2] = "backlog full or ports in use" }
local c = conv.fields
c.src_cluster = ProtoField.uint16("iccs.conv.src_cluster", "Source cluster", base.DEC)
c.dst_cluster = ProtoField.uint16("iccs.conv.dst_cluster", "Destination cluster", base.DEC)
c.src_port = ProtoField.uint16("iccs.conv.src_port", "Source port", base.DEC)
c.dst_port = ProtoField.uint16("iccs.conv.dst_port", "Destination port", base.DEC)
c.type = ProtoField.uint8("iccs.conv.type", "Type", base.DEC, conv_types)
c.flags = ProtoField.uint8("iccs.conv.flags", "Flags", base.HEX)
c.reserved = ProtoField.uint16("iccs.conv.reserved", "Reserved", base.HEX)
c.conn_id = ProtoField.uint32("iccs.conv.conn_id", "Connection id", base.HEX)
c.conn_seq = ProtoField.uint32("iccs.conv.conn_seq", "Connection sequence", base.DEC)
c.msg_id = ProtoField.uint32("iccs.conv.msg_id", "Message id", base.DEC)
c.piece_idx = ProtoField.uint16("iccs.conv.piece_idx", "Piece index", base.DEC)
c.piece_cnt = ProtoField.uint16("iccs.conv.piece_cnt", "Piece count", base.DEC)
c.msg_len = ProtoField.uint32("iccs.conv.msg_len", "Message length [bytes]", base.DEC)
c.enq_ns = ProtoField.uint64("iccs.conv.enq_ns", "Enqueue time [ns, sender's monotonic clock]", base.DEC)
c.window_bytes = ProtoField.uint32("iccs.conv.window_bytes", "Window [bytes]", base.DEC)
c.window_msgs = ProtoField.uint32("iccs.conv.window_msgs", "Window [messages]", base.DEC)
c.bytes_consumed = ProtoField.uint64("iccs.conv.bytes_consumed", "Bytes consumed", base.DEC)
c.msgs_consumed = ProtoField.uint32("iccs.conv.msgs_consumed", "Messages consumed", base.DEC)
c.refuse_reason = ProtoField.uint32("iccs.conv.refuse_reason", "Refuse reason", base.DEC, refuse_reasons)
c.payload = ProtoField.bytes("iccs.conv.payload", "Payload")
-- BUNDLE (message combining): records of a 2-byte length and one whole convergence message
c.bundle_msgs = ProtoField.uint32("iccs.conv.bundle.msgs", "Messages in the bundle", base.DEC)
c.bundle_len = ProtoField.uint16("iccs.conv.bundle.len", "Record length [bytes]", base.DEC)
local e_type = ProtoExpert.new("iccs.conv.type.expert", "Unknown convergence type",
                               expert.group.MALFORMED, expert.severity.ERROR)
local e_piece = ProtoExpert.new("iccs.conv.piece.expert", "Piece index not below piece count",
                                expert.group.MALFORMED, expert.severity.ERROR)
local e_short = ProtoExpert.new("iccs.conv.short.expert", "Data datagram shorter than a convergence header",
                                expert.group.MALFORMED, expert.severity.ERROR)
local e_bundle = ProtoExpert.new("iccs.conv.bundle.expert", "Bundle record malformed (short, past the end, or nested)",
                                 expert.group.MALFORMED, expert.severity.ERROR)
conv.experts = { e_type, e_piece, e_short, e_bundle }

-- Retransmission detection: per direction and sub-connection, the first frame of every seq (first
-- pass only; later passes read the result kept per frame).
local first_frame_of = {}  -- key "src>dst/subconn" -> { [seq] = frame number }
local retx_of = {}         -- frame number -> first frame with the same seq
function iccs.init()
    first_frame_of = {}
    retx_of = {}
end

local ip_src_f = Field.new("ip.src")
local ip_dst_f = Field.new("ip.dst")

local dissect_conv

-- A BUNDLE's records, each a convergence message of its own (in a subtree of the bundle).
local function dissect_bundle(tvb, pinfo, t)
    local off, n, first = 40, 0, nil
    while off < tvb:len() do
        if off + 2 > tvb:len() then
            t:add_proto_expert_info(e_bundle)
            break
        end
        local len = tvb(off, 2):uint()
        if len < 40 or off + 2 + len > tvb:len() or tvb(off + 2 + 8, 1):uint() == 8 then
            t:add(c.bundle_len, tvb(off, 2)):add_proto_expert_info(e_bundle)
            break
        end
        t:add(c.bundle_len, tvb(off, 2))
        local inner = dissect_conv(tvb(off + 2, len):tvb(), pinfo, t)
        first = first or inner
        n = n + 1
        off = off + 2 + len
    end
    return n, first or ""
end

dissect_conv = function(tvb, pinfo, tree)
    local t = tree:add(conv, tvb(0, 40))
    local ty = tvb(8, 1):uint()
    local idx, cnt = tvb(24, 2):uint(), tvb(26, 2):uint()
    t:add(c.src_cluster, tvb(0, 2))
    t:add(c.dst_cluster, tvb(2, 2))
    t:add(c.src_port, tvb(4, 2))
    t:add(c.dst_port, tvb(6, 2))
    local ti = t:add(c.type, tvb(8, 1))
    if conv_types[ty] == nil then ti:add_proto_expert_info(e_type) end
    t:add(c.flags, tvb(9, 1))
    t:add(c.reserved, tvb(10, 2))
    t:add(c.conn_id, tvb(12, 4))
    t:add(c.conn_seq, tvb(16, 4))
    t:add(c.msg_id, tvb(20, 4))
    t:add(c.piece_idx, tvb(24, 2))
    local pi = t:add(c.piece_cnt, tvb(26, 2))
    if idx >= cnt then pi:add_proto_expert_info(e_piece) end
    t:add(c.msg_len, tvb(28, 4))
    t:add(c.enq_ns, tvb(32, 8))
    local body = tvb:len() - 40
    if ty == 8 then
        t:add(c.bundle_msgs, tvb(28, 4))
        local n, first = dissect_bundle(tvb, pinfo, t)
        return string.format(" | BUNDLE of %d%s", n, first)
    end
    if (ty == 2 or ty == 3) and body >= 8 then
        t:add(c.window_bytes, tvb(40, 4))
        t:add(c.window_msgs, tvb(44, 4))
    elseif (ty == 5 or ty == 6) and body >= 12 then
        t:add(c.bytes_consumed, tvb(40, 8))
        t:add(c.msgs_consumed, tvb(48, 4))
    elseif ty == 4 and body >= 4 then
        t:add(c.refuse_reason, tvb(40, 4))
    elseif body > 0 then
        t:add(c.payload, tvb(40, body))
    end
    local info = string.format(" | %s %d:%d > %d:%d conn_seq=%d msg=%d", conv_types[ty] or ("type " .. ty),
                               tvb(0, 2):uint(), tvb(4, 2):uint(), tvb(2, 2):uint(), tvb(6, 2):uint(),
                               tvb(16, 4):uint(), tvb(20, 4):uint())
    if cnt ~= 1 then info = info .. string.format(" piece %d/%d", idx, cnt) end
    if ty == 1 then info = info .. string.format(" len=%d", tvb(28, 4):uint()) end
    return info
end

function iccs.dissector(tvb, pinfo, tree)
    if tvb:len() < SW_LEN then return 0 end
    pinfo.cols.protocol = "iccs"
    local t = tree:add(iccs, tvb(0, SW_LEN))
    local ver, flags = tvb(0, 1):uint(), tvb(1, 1):uint()
    local vi = t:add(f.version, tvb(0, 1))
    if ver ~= SW_VERSION then vi:add_proto_expert_info(e_version) end
    local ft = t:add(f.flags, tvb(1, 1))
    ft:add(f.flag_data, tvb(1, 1))
    ft:add(f.flag_ack, tvb(1, 1))
    ft:add(f.flag_ackreq, tvb(1, 1))
    ft:add(f.flag_retx, tvb(1, 1))
    ft:add(f.flag_tsecr, tvb(1, 1))
    ft:add(f.flag_syn, tvb(1, 1))
    ft:add(f.flag_auth, tvb(1, 1))
    ft:add(f.flag_enc, tvb(1, 1))
    local sc, seq, ack, wnd = tvb(2, 2):uint(), tvb(4, 4):uint(), tvb(8, 4):uint(), tvb(12, 2):uint()
    t:add(f.subconn, tvb(2, 2))
    t:add(f.seq, tvb(4, 4))
    t:add(f.ack, tvb(8, 4))
    t:add(f.wnd, tvb(12, 2))
    t:add(f.reserved, tvb(14, 2))
    t:add(f.sack, tvb(16, 8))
    t:add(f.tsval, tvb(24, 4))
    t:add(f.tsecr, tvb(28, 4))
    t:add(f.token, tvb(32, 8))
    local hlen = SW_LEN
    if band(flags, SW_AUTH) ~= 0 and tvb:len() >= SW_LEN + AUTH_LEN then
        t:add(f.auth_counter, tvb(SW_LEN, 8))
        t:add(f.auth_tag, tvb(SW_LEN + 8, 16))
        hlen = SW_LEN + AUTH_LEN
        t:set_len(hlen)
    end

    local is_data = band(flags, SW_DATA) ~= 0
    local names = {}
    if band(flags, SW_SYN) ~= 0 then names[#names + 1] = "SYN" end
    if band(flags, SW_AUTH) ~= 0 then names[#names + 1] = band(flags, SW_ENC) ~= 0 and "AUTH+ENC" or "AUTH" end
    if is_data then names[#names + 1] = "DATA" end
    if band(flags, SW_ACK) ~= 0 then names[#names + 1] = "ACK" end
    if band(flags, SW_ACKREQ) ~= 0 then names[#names + 1] = "ACKREQ" end
    if band(flags, SW_RETX) ~= 0 then names[#names + 1] = "RETX" end
    local info = string.format("sc=%d [%s]", sc, table.concat(names, ","))
    if is_data then info = info .. string.format(" seq=%d", seq) end
    if band(flags, SW_SYN) ~= 0 then
        info = info .. string.format(" isn=%d token=%s", seq, tvb(32, 8):uint64():tohex())
        -- the handshake block (readable unless the payload is encrypted)
        if band(flags, SW_ENC) == 0 and tvb:len() >= hlen + SYN_LEN then
            local st = tree:add(iccs, tvb(hlen, SYN_LEN), "iccs handshake block")
            st:add(f.syn_nonce, tvb(hlen, 8))
            st:add(f.syn_echo, tvb(hlen + 8, 8))
            info = info .. string.format(" nonce=%s", tvb(hlen, 8):uint64():tohex())
            if band(flags, SW_ACK) ~= 0 then info = info .. string.format(" echo=%s", tvb(hlen + 8, 8):uint64():tohex()) end
        end
    end
    if band(flags, SW_ACK) ~= 0 then info = info .. string.format(" ack=%d wnd=%d", ack, wnd) end

    if is_data then
        if band(flags, SW_RETX) ~= 0 then t:add_proto_expert_info(e_retx_flag) end
        if not pinfo.visited then
            local src, dst = ip_src_f(), ip_dst_f()
            local key = tostring(src) .. ":" .. pinfo.src_port .. ">" .. tostring(dst) .. ":" .. pinfo.dst_port ..
                        "/" .. sc
            local seen = first_frame_of[key]
            if seen == nil then
                seen = {}
                first_frame_of[key] = seen
            end
            if seen[seq] == nil then
                seen[seq] = pinfo.number
            elseif seen[seq] ~= pinfo.number then
                retx_of[pinfo.number] = seen[seq]
            end
        end
        local first = retx_of[pinfo.number]
        if first ~= nil then
            local ri = t:add(f.retx, true):set_generated()
            ri:add_proto_expert_info(e_retx_seen)
            t:add(f.retx_of, first):set_generated()
            info = info .. " [retransmission of frame " .. first .. "]"
        end
        if band(flags, SW_ENC) ~= 0 then
            if tvb:len() > hlen then t:add(f.encrypted, tvb(hlen)) end
            info = info .. string.format(" | encrypted %d bytes", tvb:len() - hlen)
        elseif tvb:len() < hlen + CONV_LEN then
            t:add_proto_expert_info(e_short)
        else
            info = info .. dissect_conv(tvb(hlen):tvb(), pinfo, tree)
        end
    end
    pinfo.cols.info = info
    return tvb:len()
end

iccs.prefs.udp_port = Pref.uint("UDP port", 9410, "UDP port of the proxies' stacks ([machine] udp_port)")
local registered_port = nil
local function register_port()
    local udp = DissectorTable.get("udp.port")
    if registered_port ~= nil then udp:remove(registered_port, iccs) end
    registered_port = iccs.prefs.udp_port
    udp:add(registered_port, iccs)
end
function iccs.prefs_changed() register_port() end
register_port()
