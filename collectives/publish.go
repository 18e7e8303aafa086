package collectives

import (
	"sync/atomic"
	"unsafe"

	"github.com/weft-hpc/weft/internal/release"
)

// publish stores v in w with release ordering and nothing more
// (internal/release): whoever loads v from w sees every write made
// before the store. The hierarchy's words (arrivals, marks, states) are
// read by polling, so none needs sync/atomic's Store, a full barrier that
// holds the publisher until the line the others poll has come back to
// its core: about one hand-off between cores, paid by a Bcast's root or a
// Reduce's sender that has nothing else to wait for
// (docs/perf/collectives.md, "Release stores"). The exception is a group
// whose waits park (park.go): there a publisher stores with sync/atomic
// and then looks for parked handles (procGroup.publish). Words that
// decide between two writers (a withdrawal, a failure) keep their
// compare-and-swaps.
func publish(w *atomic.Uint64, v uint64) {
	release.Store((*uint64)(unsafe.Pointer(w)), v)
}
