// soak.hpp: `iccs soak` (soak.cpp): alltoall for minutes under loss, duplication, reordering, WAN
// emulation and a key, with progress lines and a verdict on delivery and memory growth.
#pragma once

namespace iccs {

int cmd_soak(int argc, char** argv);

}  // namespace iccs
