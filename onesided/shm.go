package onesided

// Shared memory for the direct-store path.
//
// All ranks of one node map the same file (internal/nodeseg, under
// WEFT_SHM_DIR). The node's lowest rank creates it and publishes its name
// through the group's Allgather; the others open it, and once every rank
// has mapped it the creator unlinks it so a crashed job leaves nothing
// behind. The mapping is MAP_SHARED memory outside
// the Go heap, so it may be registered with libfabric without pinning and
// accessed through sync/atomic from every process.

import (
	"fmt"
	"syscall"
)

// anonMap maps private-to-this-process memory outside the Go heap, used for
// a rank's region when the direct-store path is off.
func anonMap(size int) ([]byte, error) {
	if size <= 0 {
		size = pageSize
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("onesided: mmap %d bytes: %w", size, err)
	}
	return mem, nil
}

const pageSize = 4096

func roundUp(n, a int) int { return (n + a - 1) / a * a }
