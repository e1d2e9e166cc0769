// library.hpp: the library's start, end and error path (library.cpp), for the entry points.
#pragma once

#include <string>

#include "magpie.hpp"

namespace iccs::magpie {

// After PMPI_Init(_thread): settings, placement (collective over MPI_COMM_WORLD when it needs host
// names), tags. A bad setting or placement stops the job with a message naming it.
void setup_after_init();
// Before a collective: false when MPI is not (or no longer) initialized. Without MPI_Init seen
// (MPI initialized by another way in), it sets up without collective steps.
bool ensure_setup();
// Reports `text` on stderr and through comm's error handler; returns the error code the call
// returns (an iccs-magpie code whose string is `text`, or `code` itself for MPI's own errors).
int raise_error(MPI_Comm comm, int code, const std::string& text);
// In MPI_Finalize before PMPI_Finalize: frees the library's communicators, writes the counters
// (ICCS_MAGPIE_COUNTERS_FILE) and the report (ICCS_MAGPIE_REPORT; collective).
void finish_before_finalize();
// iccs_magpie_counter's value (iccs_magpie.h): ~0 for an unknown name.
uint64_t counter_value(const char* collective, const char* field);

}  // namespace iccs::magpie
