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
// SIGILL and SIGABRT that prints a backtrace and calls exit(1). Left in
// place, a Go program without signal.Notify for SIGTERM would run that
// handler instead of dying from the signal: status 1 instead of 143, exit
// handlers run from signal context, and, when the signal interrupted a
// thread inside libfabric (fi_getinfo holds malloc's and libfabric's
// locks), a destructor waiting forever for a lock that thread holds.
//
// The constructors run when fabric loads libfabric (dl.go), inside the Go
// program. The load asks libinfinipath not to install its handlers
// (IPATH_NO_BACKTRACE), saves the disposition of every signal before it
// and puts back afterwards each one it changed, unless the new handler lies
// in this program (sigaction.c): the Go runtime's handlers stay in place,
// so SIGINT and SIGTERM kill the process as the signal (a shell sees 130
// and 143) and a crash in C code is reported by the Go runtime. The calls
// that may initialise providers (GetInfo, OpenFabric, OpenDomain) are also
// guarded: a handler that a provider library installs during the call from
// outside this program is replaced by the disposition the process had
// before the call.

// sigLoadRestored reports whether the load put back sig's disposition.
func sigLoadRestored(sig int) bool { return C.weft_sig_load_restored(C.int(sig)) != 0 }

// sigInSelf reports whether sig's handler now lies in this program (the Go
// runtime's handler, in a Go program that did not install its own).
func sigInSelf(sig int) bool { return C.weft_sig_in_self(C.int(sig)) != 0 }

// sigGrabbedNow is the mask (bit n: signal n) of signals whose handler now
// lies in one of the libraries known to install handlers at load.
func sigGrabbedNow() uint64 { return uint64(C.weft_sig_grabbed_now()) }

// sigRestored is the mask of signals whose foreign handler a guarded call
// has undone so far.
func sigRestored() uint64 { return uint64(C.weft_sig_restored()) }

// sigGuardSelftest installs a foreign handler for sig inside the guard and
// reports whether the guard restored the previous disposition (1), did not
// (0), or the test could not be set up (-1).
func sigGuardSelftest(sig int) int { return int(C.weft_sig_guard_selftest(C.int(sig))) }
