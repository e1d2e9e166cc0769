// wan_script.hpp: the texts that drive the WAN emulator's parameters (wan_emu.hpp), compiled to a
// WanProgram at start-up. Every error names the file and line: "s.wan:3: set_sym needs ...".
//
// Script (Panda style; `#` starts a comment; sites are the ids of [wan] sites):
//   read SCENARIO             every link back to the configured values, then SCENARIO's lines
//                             (a file, relative to the script's directory)
//   sleep MS                  wait MS milliseconds (from the previous step's scheduled time: no drift)
//   set A B BW LAT_S          link A -> B: bandwidth BW bytes/s (0 = unlimited), latency LAT_S seconds
//   set_sym [NAME] A B BW LAT_S   both directions; NAME (Panda's "one") is accepted and ignored
//   loss A B P                link A -> B loses each frame with probability P (0..1); set and
//   loss_sym A B P            set_sym leave a link's loss as it is
//   forever [{]               the rest of the script (or the block up to a line `}`) repeats forever;
//                             it must sleep (a loop without one is refused)
// Scenario file: lines `set ...`, `set_sym ...`, `loss ...`, `loss_sym ...`, `cut A B` (link A -> B
// missing: traffic routes through other sites), `cut_sym A B`; every site must stay reachable.
// Measured series: lines `TIME_S A B BW LAT_S [LOSS]` (link A -> B from TIME_S seconds after start;
// without LOSS the link keeps its loss), times non-decreasing; after the last line the last values stay.
#pragma once

#include <string>

#include "wan_emu.hpp"

namespace iccs {

// `base`: the configured topology (sites and defaults a scenario starts from). `name` is the file
// name messages use; `dir` is where `read` looks (empty: the working directory).
bool wan_parse_script(const std::string& text, const std::string& name, const std::string& dir,
                      const WanTopology& base, WanProgram& out, std::string& err);
bool wan_parse_series(const std::string& text, const std::string& name, const WanTopology& base, WanProgram& out,
                      std::string& err);
// The same, from a file (an unreadable file is an error naming it).
bool wan_load_script(const std::string& path, const WanTopology& base, WanProgram& out, std::string& err);
bool wan_load_series(const std::string& path, const WanTopology& base, WanProgram& out, std::string& err);

// One `set`/`set_sym` argument list after the command word: "A B BW LAT_S" (used by the live
// command too). False with err ("...: expected ...").
bool wan_parse_link_values(const std::string& args, uint32_t sites, uint32_t& a, uint32_t& b, WanLinkParams& p,
                           std::string& err);

// One `loss` argument list: "A B P" (the live command). False with err.
bool wan_parse_loss_values(const std::string& args, uint32_t sites, uint32_t& a, uint32_t& b, double& loss,
                           std::string& err);

}  // namespace iccs
