// demo_main.cpp: iccs-demo, the binary behind `./iccs demo`: the demo alone (iccs_cli_core), so
// that a first run builds no other command. `iccs-demo ARGS` is `iccs-cli demo ARGS`.
#include "demo.hpp"

int main(int argc, char** argv) { return iccs::cmd_demo(argc - 1, argv + 1); }
