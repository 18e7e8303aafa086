package onesided

import (
	"errors"
	"fmt"
	"os"

	"github.com/weft-hpc/weft/internal/nodeseg"
)

// Direct stores on dynamic windows. Memory a rank allocates on its own
// cannot be reached by the other processes of its node, but memory it
// asks the window for can: AttachShared allocates it in a node segment
// file (internal/nodeseg) and the Region names the file, so that a rank
// of the same node maps it the first time it addresses the Region and
// from then on copies into and out of it, and updates it with CPU
// atomics, as on an Allocate window's direct-store path. Ranks of other
// nodes reach the same memory through libfabric, where it is registered
// like any attached memory.
//
// One engine per location for atomics: CPU atomics and a provider's
// atomics on one word do not exclude each other, so a shared Region's
// atomics are CPU atomics only where every rank of the window runs on
// the Region's node (Window.oneNode, known alike on every rank), and
// libfabric's otherwise, for every rank, the local ones included.

// maxDynMaps bounds the other ranks' shared Regions a rank keeps mapped;
// past it one mapping is dropped (a Region still attached is mapped
// again when next addressed; a detached one cannot be).
const maxDynMaps = 64

// AttachShared allocates n bytes (n ≥ 1, at most 2^40) of zeroed memory
// outside the Go heap, attaches it to the dynamic window w as Attach
// does, and returns its Region and the memory. Ranks of this node reach
// the memory by direct stores (copies and CPU atomics, no libfabric
// operation, no progress needed from this rank) unless shared memory is
// off for the window (WithSharedMemory(ShmOff) on any rank); ranks of
// other nodes through libfabric. DirectRegion says which a rank uses.
//
// The memory belongs to the window: Detach (or Free) unmaps it, after
// which the slice must not be touched. Like Attach it is not collective.
func (w *Window) AttachShared(n int) (Region, []byte, error) {
	if err := w.dynamicCheck("AttachShared"); err != nil {
		return Region{}, nil, err
	}
	if n <= 0 || n > dynMask {
		return Region{}, nil, fmt.Errorf("onesided: AttachShared(%d): want 1..2^40 bytes: %w", n, ErrInvalid)
	}
	a := attachment{}
	if w.dynShare {
		seg, err := nodeseg.Create("dyn", roundUp(n, pageSize))
		if err != nil {
			return Region{}, nil, fmt.Errorf("onesided: AttachShared: %w", err)
		}
		a.seg, a.buf = seg, seg.Bytes()[:n:n]
	} else {
		mem, err := anonMap(roundUp(n, pageSize))
		if err != nil {
			return Region{}, nil, fmt.Errorf("onesided: AttachShared: %w", err)
		}
		a.anon, a.buf = mem, mem[:n:n]
	}
	addr, key, mr, err := w.net.attach(a.buf)
	if err != nil {
		a.free()
		return Region{}, nil, fmt.Errorf("onesided: AttachShared: %w", err)
	}
	a.mr = mr
	a.region = Region{Rank: w.rank, Addr: addr, Key: key, Len: n}
	if a.seg != nil {
		a.region.seg, a.region.node = a.seg.Name(), w.nodeKey
	}
	w.attached[[2]uint64{addr, key}] = a
	return a.region, a.buf, nil
}

// DirectRegion reports whether this rank reaches Region r by direct
// stores: r is AttachShared memory of this rank's node on a window
// that shares it. Atomics on r are direct stores as well only where
// every rank of the window runs on r's node.
func (w *Window) DirectRegion(r Region) bool {
	return w.dyn != nil && w.dynShare && r.seg != "" && r.node == w.nodeKey
}

// dynEntry is a Region this rank has addressed (Window.dyn): the path
// of its operations, once known, and with direct stores its memory.
type dynEntry struct {
	region Region
	state  uint8 // dynUnknown, dynNet or dynDirect
	mem    []byte
}

const (
	dynUnknown = iota
	dynNet
	dynDirect
)

// regionMem returns the memory of Region r, whose operation's checks
// passed and gave the encoded offset enc, when this rank reaches it by
// direct stores, mapping it the first time; nil when the operation
// goes through libfabric. atomic asks for an atomic operation, direct
// only on a one-node window.
func (w *Window) regionMem(op string, r Region, enc int, atomic bool) ([]byte, error) {
	if r.seg == "" || !w.dynShare || atomic && !w.oneNode {
		return nil, nil
	}
	e := &w.dyn[r.Rank][enc>>dynShift]
	switch e.state {
	case dynNet:
		return nil, nil
	case dynDirect:
		return e.mem, nil
	}
	if r.node != w.nodeKey {
		e.state = dynNet
		return nil, nil
	}
	if r.Rank == w.rank {
		a, ok := w.attached[[2]uint64{r.Addr, r.Key}]
		if !ok || a.region != r {
			return nil, fmt.Errorf("onesided: %s: %+v is not attached: %w", op, r, ErrInvalid)
		}
		e.state, e.mem = dynDirect, a.buf
		return e.mem, nil
	}
	s := w.dynMaps[r.seg]
	if s == nil || len(s.Bytes()) < r.Len {
		var err error
		if s, err = w.mapRegion(r); err != nil {
			return nil, fmt.Errorf("onesided: %s: %w", op, err)
		}
	}
	e.state, e.mem = dynDirect, s.Bytes()[:r.Len:r.Len]
	return e.mem, nil
}

// mapRegion maps another rank's shared Region r and keeps the mapping
// (dropping one other where maxDynMaps are kept already).
func (w *Window) mapRegion(r Region) (*nodeseg.Seg, error) {
	if old := w.dynMaps[r.seg]; old != nil {
		w.unmapRegion(r.seg, old)
	} else if len(w.dynMaps) >= maxDynMaps {
		for name, s := range w.dynMaps {
			w.unmapRegion(name, s)
			break
		}
	}
	s, err := nodeseg.Open(r.seg, r.Len)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("rank %d's Region is detached: %w", r.Rank, ErrInvalid)
		}
		return nil, fmt.Errorf("map rank %d's Region: %w", r.Rank, err)
	}
	if w.dynMaps == nil {
		w.dynMaps = map[string]*nodeseg.Seg{}
	}
	w.dynMaps[r.seg] = s
	return s, nil
}

// unmapRegion drops the mapping s of segment name and forgets it in
// every entry that used it.
func (w *Window) unmapRegion(name string, s *nodeseg.Seg) {
	for q := range w.dyn {
		if q == w.rank {
			continue
		}
		for i := range w.dyn[q] {
			if e := &w.dyn[q][i]; e.region.seg == name {
				*e = dynEntry{region: e.region}
			}
		}
	}
	_ = s.Close()
	delete(w.dynMaps, name)
}

// closeDynMaps unmaps every other rank's shared Region this rank mapped.
func closeDynMaps(maps map[string]*nodeseg.Seg) {
	for _, s := range maps {
		_ = s.Close()
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// regionRequest is the Request of an operation on Region r just issued:
// complete at once where it was a direct store, else once the libfabric
// operations issued so far are (this rank's own Regions included: they
// are not direct-store memory of its window region).
func (w *Window) regionRequest(r Region, atomic bool) *Request {
	if w.DirectRegion(r) && (!atomic || w.oneNode) { // the operation checked it is mapped
		return &Request{}
	}
	return &Request{w: w, n: w.net.issued()}
}
