// demo.hpp: `iccs demo`.
#pragma once
namespace iccs {
int cmd_demo(int argc, char** argv);
// the stack alone over the in-memory wire (`iccs demo --wire`)
int cmd_demo_wire(int argc, char** argv);
// the study in miniature: an application over direct and over the ICCS (demo_study.cpp, the default)
int cmd_demo_study(int argc, char** argv);
}
