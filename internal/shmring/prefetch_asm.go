//go:build amd64 || arm64

package shmring

// prefetchWrite asks the core to fetch the cache line holding addr for
// writing (PREFETCHW, PRFM PSTL1KEEP); it never faults and changes no
// memory.
//
//go:noescape
func prefetchWrite(addr *byte)

// prefetchRead asks the core to fetch the cache line holding addr for
// reading (PREFETCHT0, PRFM PLDL1KEEP).
//
//go:noescape
func prefetchRead(addr *byte)
