package fabric

/*
#include "shim.h"
*/
import "C"

// Signal dispositions and libfabric.
//
// libfabric 1.17 as Debian builds it links the psm and psm2 providers'
// libraries (libpsm_infinipath, libinfinipath, libpsm2). libinfinipath's
// ELF constructor installs a handler for SIGINT, SIGTERM, SIGSEGV, SIGBUS,
// SIGILL and SIGABRT that prints a backtrace and calls exit(1), before any
// code of the program runs. The Go runtime then records that handler as
// the one to forward to: a Go program without signal.Notify for SIGTERM
// "dies from the signal" by forwarding it to the library's handler, which
// exits with status 1 instead, running exit handlers from signal context;
// when the signal interrupted a thread inside libfabric (fi_getinfo holds
// malloc's and libfabric's locks), libfabric's destructor then waits
// forever for a lock that thread holds.
//
// sigaction.c therefore resets, in a constructor of its own (which runs
// after the libraries' constructors and before the Go runtime installs
// its handlers), every handler that lies in one of those libraries to the
// default disposition: SIGINT and SIGTERM kill the process as the signal
// (a shell sees 130 and 143), and a crash in C code is reported by the Go
// runtime. The calls that may load or initialise providers (GetInfo,
// OpenFabric, OpenDomain) are also guarded: a handler that a provider
// library installs during the call from outside this program is replaced
// by the disposition the process had before the call.

// sigResetAtStart is the mask (bit n: signal n) of handlers reset at start.
func sigResetAtStart() uint64 { return uint64(C.weft_sig_reset_at_start()) }

// sigGrabbedNow is the mask of signals whose handler now lies in one of
// the libraries whose handlers are reset at start.
func sigGrabbedNow() uint64 { return uint64(C.weft_sig_grabbed_now()) }

// sigRestored is the mask of signals whose foreign handler a guarded call
// has undone so far.
func sigRestored() uint64 { return uint64(C.weft_sig_restored()) }

// sigGuardSelftest installs a foreign handler for sig inside the guard and
// reports whether the guard restored the previous disposition (1), did not
// (0), or the test could not be set up (-1).
func sigGuardSelftest(sig int) int { return int(C.weft_sig_guard_selftest(C.int(sig))) }
