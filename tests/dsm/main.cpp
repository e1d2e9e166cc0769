// The Catch2 main of the DSM tests (their own binary: the DSM installs a SIGSEGV handler and maps
// regions at fixed addresses).
#define CATCH_CONFIG_MAIN
// Catch2's own SIGSEGV handler would sit in front of the DSM's fault handler between test cases.
#define CATCH_CONFIG_NO_POSIX_SIGNALS
#include <catch2/catch.hpp>
