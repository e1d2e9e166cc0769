// fuzz_eth: whole Ethernet frames into Stack::input_burst (eth -> arp | ipv4 -> reassembly ->
// udp -> handler), the way a device hands them over, as chains cut at fuzzed places.
//
// Input: byte 0 chooses how the frame is cut into segments (fuzz::split_from: first segment on
// and around the header boundaries, then small or large segments); the rest is the frame.
// The stack under test is 02:00:00:00:00:02 / 10.0.0.2 with UDP ports 7 (echo in place),
// 9 (discard) and 19 (echo a copy) bound and MTU 576, so a datagram that gets through is echoed
// back, fragmented when long, to the peer 10.0.0.1, which must receive it byte for byte.
// Checked: no frame vanishes without a counter, reassembly stays within its caps, everything
// transmitted is well formed, no segment leaks (see fuzz_common.hpp).
#include "fuzz_common.hpp"

using namespace fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzPool pool(4096, 2048);
    if (size == 0 || size > 70000) return 0;
    Reader in(data, size);
    const Split split = split_from(in.u8());
    const std::vector<uint8_t> frame = in.rest();
    {
        EchoRig rig(pool, 576);
        rig.feed(make_pkt(pool, frame, split));
        rig.finish();
    }
    pool.end_of_input();
    return 0;
}
