package fabric

import (
	"sync"

	"github.com/weft-hpc/weft/internal/wlog"
)

var log = wlog.Named("fabric")

var (
	liveMu sync.Mutex
	live   = map[string]int{}
)

// track adjusts the count of open objects of a kind.
func track(kind string, delta int) {
	if delta == 0 {
		return
	}
	liveMu.Lock()
	live[kind] += delta
	if live[kind] == 0 {
		delete(live, kind)
	}
	liveMu.Unlock()
}

// LiveObjects returns the number of open libfabric objects of each kind
// (fabric, domain, ep, cq, av, cntr, mr, buffer) in this process. Tests use
// it to assert that everything was closed.
func LiveObjects() map[string]int {
	liveMu.Lock()
	defer liveMu.Unlock()
	m := make(map[string]int, len(live))
	for k, v := range live {
		m[k] = v
	}
	return m
}
