// interop.hpp: `iccs-cli interop`: the stack on a real link (net_af_packet) against a Linux kernel
// UDP socket, for the interoperability test (tests/integration/interop_afpacket.py).
#pragma once
namespace iccs {
// argv: the arguments after "interop".
int cmd_interop(int argc, char** argv);
}
