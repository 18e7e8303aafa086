package fabric

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/weft-hpc/weft/internal/settings"
)

// The shm provider of libfabric 1.17 names each endpoint's region
// /dev/shm/<pid>:<domain>:<endpoint> and removes it when the endpoint closes.
// A process that is killed leaves its regions behind, and a later process
// that is given the same pid then fails fi_enable with EBUSY on its first
// endpoints. Before the first shm endpoint of a process is opened, the regions
// left by dead processes (kill(pid, 0) reports ESRCH) and by an earlier owner
// of this pid (this process has opened no shm endpoint yet, so none of them
// is its own) are removed. WEFT_TUNE=shmsweep=0 disables it.

var shmSweepOnce sync.Once

// shmDir is where the shm provider creates its regions.
var shmDir = "/dev/shm"

// sweepStaleShm removes stale shm-provider regions once per process.
func sweepStaleShm() {
	shmSweepOnce.Do(func() {
		if t, _ := settings.Tune(); !t.ShmSweep {
			return
		}
		n := removeStaleShm(shmDir, os.Getpid())
		if n > 0 {
			log.Debug("removed stale shm regions of dead processes", "count", n, "dir", shmDir)
		}
	})
}

// removeStaleShm removes the regions in dir that belong to dead processes or
// to self, and returns how many it removed.
func removeStaleShm(dir string, self int) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	removed := 0
	for _, e := range ents {
		pid, ok := shmRegionPID(e.Name())
		if !ok {
			continue
		}
		if pid != self {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				continue // alive, or not ours to judge (EPERM)
			}
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil {
			removed++
		}
	}
	return removed
}

// shmRegionPID parses "<pid>:<n>:<m>" (all decimal) and returns pid.
func shmRegionPID(name string) (int, bool) {
	parts := strings.Split(name, ":")
	if len(parts) != 3 {
		return 0, false
	}
	var pid int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || p == "" || p[0] == '+' {
			return 0, false
		}
		if i == 0 {
			pid = v
		}
	}
	return pid, pid > 0
}
