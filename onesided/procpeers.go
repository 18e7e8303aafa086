package onesided

// Ranks of one window in one process.
//
// Several ranks of a window may live in one process (goroutine ranks, or a
// window over endpoint.CreateEndpoints handles). libfabric's shm provider
// reaches an endpoint of the same process through its owner's own mapping
// of the endpoint's region (it finds the name in its list of this process's
// endpoints instead of mapping the region again), and closing the endpoint
// unmaps that region. A rank of the same process that is still inside an
// operation on the window — a progress call that reads a completion
// pointing into the closed region, a write to it — then crashes the
// process. Across processes a peer keeps its own mapping and only sees its
// operations fail.
//
// Free's synchronisation proves that every rank is past its last operation
// before anyone closes. When it fails (the context ended, a rank failed),
// the libfabric objects of this rank are parked instead: they are closed
// when the last rank of the window in this process releases its own. A
// rank that left that way will never answer again, so the waits of the
// other ranks of the process on the window fail from then on with
// ErrPeerGone instead of waiting for their context or WEFT_ONESIDED_TIMEOUT.

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
)

// procKey identifies this process among the ranks of a window.
var procKey = sync.OnceValue(func() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (it crashes the program instead)
	return binary.LittleEndian.Uint64(b[:])
})

// windowSeq numbers the libfabric paths this process opens; the lowest
// in-process rank's number names the window's set of in-process ranks.
var windowSeq atomic.Uint64

// procPeers counts the ranks of one window in this process that have not
// released their libfabric objects yet, and holds the releases parked
// until they all have.
type procPeers struct {
	key    uint64
	live   int
	parked []func()
	gone   atomic.Int64 // the first rank that left without synchronising, or -1
}

var procPeerSets struct {
	sync.Mutex
	m map[uint64]*procPeers
}

// joinProcPeers returns the set named key of n in-process ranks, creating
// it on the first call. Every one of the n ranks joins once and leaves
// once.
func joinProcPeers(key uint64, n int) *procPeers {
	procPeerSets.Lock()
	defer procPeerSets.Unlock()
	if procPeerSets.m == nil {
		procPeerSets.m = map[uint64]*procPeers{}
	}
	p := procPeerSets.m[key]
	if p == nil {
		p = &procPeers{key: key, live: n}
		p.gone.Store(-1)
		procPeerSets.m[key] = p
	}
	return p
}

// leave records that rank is done with the window. A non-nil release is
// parked (rank left without synchronising); when the last rank leaves,
// every parked release runs (on the caller's goroutine, after the set is
// gone).
func (p *procPeers) leave(rank int, release func()) {
	procPeerSets.Lock()
	if release != nil {
		p.parked = append(p.parked, release)
		p.gone.CompareAndSwap(-1, int64(rank))
	}
	p.live--
	var run []func()
	if p.live <= 0 {
		run, p.parked = p.parked, nil
		delete(procPeerSets.m, p.key)
	}
	procPeerSets.Unlock()
	for _, f := range run {
		f()
	}
}

// goneErr returns an ErrPeerGone error once a rank of the set has left
// without synchronising, else nil.
func (p *procPeers) goneErr() error {
	if r := p.gone.Load(); r >= 0 {
		return fmt.Errorf("rank %d of the window (in this process) released it without synchronising, and will not answer: %w", r, ErrPeerGone)
	}
	return nil
}

// parkedReleases reports how many releases wait in sets of this process
// (tests).
func parkedReleases() int {
	procPeerSets.Lock()
	defer procPeerSets.Unlock()
	n := 0
	for _, p := range procPeerSets.m {
		n += len(p.parked)
	}
	return n
}
