// rt_iccs_module.cpp: the entry of libiccs-rt-iccs.so, the iccs transport as a module that a
// PARMACS program loads only when its run asks for that transport (rt_launch.cpp,
// iccs_transport_module): the program itself links neither DPDK nor the proxies.
#include "rt_core.hpp"

// The configure this module was built by (compute/meson.build): the program loading it checks it
// is its own before it calls anything of it.
extern "C" const char iccs_rt_iccs_build_id[] = ICCS_RT_MODULE_BUILD_ID;

extern "C" iccs::RtCore* iccs_rt_iccs_make(const iccs::RtSpec* spec, std::string* err) {
    return iccs::make_iccs_runtime(*spec, *err).release();
}
