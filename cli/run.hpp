// run.hpp: `iccs run` and the cluster part of `iccs demo`.
#pragma once
namespace iccs {
// argv: the arguments after "run" (or after "demo" when demo is true).
int cmd_run(int argc, char** argv, bool demo);
}
