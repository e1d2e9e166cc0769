// run_widearea.hpp: `iccs run NAME` of the wide-area suite (apps/widearea/).
#pragma once

namespace iccs {

// Whether NAME is a registered wide-area program (apps/widearea/registry.cpp).
bool is_widearea_name(const char* name);
// `iccs run --list-widearea`: one line per program, "NAME<TAB>help".
void print_widearea_list();
// argv[0] is the program; the rest its options (`iccs run NAME --help`).
int cmd_run_widearea(int argc, char** argv);

}  // namespace iccs
