package onesided

import (
	"sync/atomic"

	"github.com/weft-hpc/weft/endpoint"
)

// opKind is a kind of one-sided operation, as the stats file counts them.
type opKind uint8

const (
	opPut    opKind = iota // Put, PutTyped, PutDevice and their Region forms
	opGet                  // Get, GetTyped, GetDevice and their Region forms
	opSignal               // PutSignal (Signal) and PutSignalRegion: data and signal
	opAtomic               // Accumulate, GetAccumulate, FetchAndOp, CompareAndSwap, typed accumulates
	numOpKinds
)

var opNames = [numOpKinds]string{"put", "get", "signal", "atomic"}

// profile counts a process's one-sided operations per kind, for the
// stats file fabrun stats reads (endpoint.StatsSection). It exists
// only for windows whose group is an endpoint communicator of a world
// that counts (endpoint.WithStats, WEFT_STATS); the windows of one world
// share it.
type profile struct {
	ops, bytes [numOpKinds]atomic.Uint64
}

// profileOf returns the profile of g's world (made at its first
// window); nil when g has no world or it does not count.
func profileOf(g Group) *profile {
	wg, ok := g.(interface{ World() *endpoint.World })
	if !ok {
		return nil
	}
	p, _ := endpoint.StatsSection(wg.World(), "onesided", func() *profile { return &profile{} })
	return p
}

// profileCount is one kind's line of the stats file.
type profileCount struct {
	Ops   uint64 `json:"ops"`
	Bytes uint64 `json:"bytes"`
}

// Snapshot is the stats file's section (endpoint.Snapshotter).
func (p *profile) Snapshot() any {
	out := map[string]profileCount{}
	for k := range numOpKinds {
		if n := p.ops[k].Load(); n > 0 {
			out[opNames[k]] = profileCount{Ops: n, Bytes: p.bytes[k].Load()}
		}
	}
	return out
}

// count counts an operation of kind k moving n bytes, when the window's
// world counts.
func (w *Window) count(k opKind, n int) {
	if p := w.prof; p != nil {
		p.ops[k].Add(1)
		p.bytes[k].Add(uint64(n))
	}
}
