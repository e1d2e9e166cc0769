// demo.hpp: `iccs demo`.
#pragma once
namespace iccs {
int cmd_demo(int argc, char** argv);
}
