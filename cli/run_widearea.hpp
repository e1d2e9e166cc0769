// run_widearea.hpp: the wide-area suite (apps/widearea/) in `iccs run`: its rows come from the
// registry (run_table.cpp), their launch function is launch_widearea (run_table.hpp).
#pragma once

namespace iccs {

// `iccs run --list-widearea`: one line per program, "NAME<TAB>help".
void print_widearea_list();

}  // namespace iccs
