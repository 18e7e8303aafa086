package fabric

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// libfabric is loaded at run time, on the first call that needs it
// (GetInfo, Select, OpenFabric), not linked: loading Debian 12's libfabric
// 1.17 runs the constructors of libinfinipath and libpsm2, which sleep
// ≈ 200 ms calibrating a timer, so a linked libfabric made every program
// that imports this package pay that at exec, whether it used the network
// or not (docs/perf/startup.md). Only five functions of the library itself
// are called (dl.c resolves them with the symbol versions a linked program
// binds to); everything else goes through the ops tables of the objects
// they return.
//
// The library's constructors now run inside the Go program, whose runtime
// has installed its signal handlers. libinfinipath's constructor installs
// its own for SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL and SIGABRT (they
// print a backtrace and call exit(1)) unless IPATH_NO_BACKTRACE is set, so
// the load sets it in the C environment for its duration (when the program
// has not set it) and no such handler is ever in place. Whatever else the
// load changes in any signal's disposition is put back afterwards
// (sigaction.c). Blocking signals cannot close that window the way it was
// closed at exec: a mask is per thread, and a signal sent to the process
// goes to any of the Go program's threads that does not block it.

// libName is the library loaded (a variable so tests can name one that
// does not exist or lacks libfabric's symbols).
var libName = "libfabric.so.1"

// libQuietIPath sets IPATH_NO_BACKTRACE during the load (tests turn it off
// to check that the handlers the load installs are undone).
var libQuietIPath = true

var lib struct {
	once   sync.Once
	err    error
	loaded atomic.Bool
}

// loadLib loads libfabric once per process; every later call returns the
// first one's result. A library that cannot be loaded, or lacks one of the
// functions fabric calls, is an error wrapping ErrNotSupported.
func loadLib() error {
	lib.once.Do(func() {
		name := C.CString(libName)
		defer C.free(unsafe.Pointer(name))
		quiet := C.int(0)
		if libQuietIPath {
			quiet = 1
		}
		if C.weft_dl_load(name, quiet) != 0 {
			lib.err = fmt.Errorf("fabric: cannot load libfabric (%s): %s: %w", libName, C.GoString(C.weft_dl_error()), ErrNotSupported)
			return
		}
		lib.loaded.Store(true)
	})
	return lib.err
}

// Loaded reports whether libfabric has been loaded into this process. The
// first GetInfo, Select or OpenFabric loads it; a program that calls none
// of them never does, and does not pay libfabric's start-up cost.
func Loaded() bool { return lib.loaded.Load() }

// libLoads is how many times the load ran in this process (at most 1).
func libLoads() uint64 { return uint64(C.weft_dl_loads()) }
