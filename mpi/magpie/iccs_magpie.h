/* iccs_magpie.h: what libiccs-magpie.so offers a program beyond MPI's own functions (mpi/magpie/README.md).
 * A program that may also run without the library looks it up instead of linking it:
 *     unsigned long long (*counter)(const char*, const char*) = dlsym(RTLD_DEFAULT, "iccs_magpie_counter");
 */
#ifndef ICCS_MAGPIE_H
#define ICCS_MAGPIE_H

#ifdef __cplusplus
extern "C" {
#endif

/* One counter of one collective on this rank so far, as named in the counters file: collective
 * "barrier", "bcast", ..., "exscan"; field "calls", "passthrough", "bytes", "msgs", "sent_bytes",
 * "shm_msgs", "shm_bytes", "wan_msgs", "wan_bytes", "wan_bytes_min", "wan_hops_max". An unknown
 * name gives ~0ULL. */
unsigned long long iccs_magpie_counter(const char* collective, const char* field);

#ifdef __cplusplus
}
#endif

#endif
