// demo.hpp: `iccs demo`.
#pragma once

#include <cstdint>

#include "options.hpp"

namespace iccs {

int cmd_demo(int argc, char** argv);
// the stack alone over the in-memory wire (`iccs demo --wire`), n messages each way
int cmd_demo_wire(uint64_t n);
// the study in miniature: an application over direct and over the ICCS (demo_study.cpp, the default)
int cmd_demo_study(const cli::Args& p);

}  // namespace iccs
