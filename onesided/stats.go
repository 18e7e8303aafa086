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

// profile counts a process's one-sided operations per kind, and per
// target process, for the stats file fabrun stats reads
// (endpoint.StatsSection). It exists only for windows whose group is an
// endpoint communicator of a world that counts (endpoint.WithStats,
// WEFT_STATS); the windows of one world share it.
type profile struct {
	ops, bytes [numOpKinds]atomic.Uint64
	peers      []peerOps // by the target's world rank
}

// peerOps counts the operations aimed at one process (every kind).
type peerOps struct{ ops, bytes atomic.Uint64 }

// setProfile gives w the profile of its group's world (made at the
// world's first window) and the world rank of each window rank; none
// when the group has no world or it does not count.
func (w *Window) setProfile() {
	wg, ok := w.g.(interface {
		World() *endpoint.World
		WorldRank(int) (int, error)
	})
	if !ok || !wg.World().Counting() {
		return
	}
	size := wg.World().Comm().Size()
	p, ok := endpoint.StatsSection(wg.World(), "onesided", func() *profile { return &profile{peers: make([]peerOps, size)} })
	if !ok {
		return
	}
	procOf := make([]int32, w.size)
	for r := range procOf {
		wr, err := wg.WorldRank(r)
		if err != nil || wr < 0 || wr >= len(p.peers) {
			return // not an endpoint communicator of that world
		}
		procOf[r] = int32(wr)
	}
	w.prof, w.procOf = p, procOf
}

// profileCount is one kind's line of the stats file.
type profileCount struct {
	Ops   uint64 `json:"ops"`
	Bytes uint64 `json:"bytes"`
}

// profilePeer is one target process's line of the stats file.
type profilePeer struct {
	Rank int `json:"rank"` // the target's world rank
	profileCount
}

// Snapshot is the stats file's section (endpoint.Snapshotter): the
// operations per kind, and per target process those with any.
func (p *profile) Snapshot() any {
	out := struct {
		Kinds map[string]profileCount `json:"kinds"`
		Peers []profilePeer           `json:"peers"`
	}{Kinds: map[string]profileCount{}, Peers: []profilePeer{}}
	for k := range numOpKinds {
		if n := p.ops[k].Load(); n > 0 {
			out.Kinds[opNames[k]] = profileCount{Ops: n, Bytes: p.bytes[k].Load()}
		}
	}
	for r := range p.peers {
		if n := p.peers[r].ops.Load(); n > 0 {
			out.Peers = append(out.Peers, profilePeer{r, profileCount{Ops: n, Bytes: p.peers[r].bytes.Load()}})
		}
	}
	return out
}

// count counts an operation of kind k moving n bytes to or from window
// rank target, when the window's world counts.
func (w *Window) count(k opKind, target, n int) {
	if p := w.prof; p != nil {
		p.ops[k].Add(1)
		p.bytes[k].Add(uint64(n))
		q := &p.peers[w.procOf[target]]
		q.ops.Add(1)
		q.bytes.Add(uint64(n))
	}
}
