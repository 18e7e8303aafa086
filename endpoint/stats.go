package endpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
)

// EnvStats names a directory into which World.Close writes this
// process's traffic (World.Stats) as weft-stats.RANK.json, for
// `fabrun stats DIR` to report on the whole job (fabrun --stats sets it);
// set, the world counts its traffic (as WithStats). Unset: no counting,
// nothing written.
const EnvStats = "WEFT_STATS"

// Traffic counts messages and the bytes of their payloads.
type Traffic struct {
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
}

// PeerTraffic is what this process sent to one world rank through one
// transport.
type PeerTraffic struct {
	Rank      int    `json:"rank"`      // the destination's world rank (its process)
	Transport string `json:"transport"` // TransportNode or TransportFabric
	Traffic
}

// Stats is the point-to-point traffic this process has sent since Init
// (when its world counts: WithStats, WithStatsDir, WEFT_STATS),
// on every communicator and endpoint handle, per destination process: a
// row of the job's communication matrix (fabrun stats puts the rows
// together, so each rank's received traffic is its column). A message
// counts once, when its send starts (Isend, Send, Issend, IsendBatch,
// the typed, parts and device sends, a persistent request's Start, a
// partitioned send's Start), with its payload bytes (the packed size of
// a typed message). Messages that weft's layers send through these calls
// count too (collectives' network steps, active messages); one-sided
// transfers, the collectives' steps through shared memory, and the
// protocol messages of a rendezvous are not messages and do not.
type Stats struct {
	Rank  int           `json:"rank"`  // this process's world rank
	Size  int           `json:"size"`  // ranks in the world
	Host  string        `json:"host"`  // this process's node: its host name (or WEFT_NODE_ID)
	Sent  Traffic       `json:"sent"`  // the sum of Peers
	Peers []PeerTraffic `json:"peers"` // by rank, then transport; those with traffic only
}

// sentStats is what one endpoint (vci) sent, per transport and world
// rank. A private endpoint's counters have one writer, its owner (plain
// loads and stores, no locked instruction); a shared endpoint's callers
// add atomically; Stats reads them from any goroutine.
type sentStats struct {
	peers [2][]peerCount // [0] node transport, [1] libfabric; by world rank
}

type peerCount struct {
	msgs, bytes atomic.Uint64
}

func (p *peerCount) add(n int) {
	p.msgs.Store(p.msgs.Load() + 1)
	p.bytes.Store(p.bytes.Load() + uint64(n))
}

func (p *peerCount) addAtomic(n int) {
	p.msgs.Add(1)
	p.bytes.Add(uint64(n))
}

// count counts a message of n bytes to comm rank dest if the world
// counts (WithStats, WEFT_STATS). Off, it costs a load and a test,
// inlined: an atomic store is a locked instruction on amd64, and two of
// them a message cost 10-15 ns of an 80 ns message (BenchmarkRate8B),
// so counting is not on by default. A private endpoint has one writer
// (its owner) and stores; a shared one's callers add atomically, inside
// its lock or not.
func (c *Comm) count(dest, n int) {
	if c.w.cfg.stats {
		c.countSlow(dest, n, c.v.shared)
	}
}

// countSlow counts, with atomic adds where other goroutines may count at
// once.
func (c *Comm) countSlow(dest, n int, atomicAdd bool) {
	p := c.sentTo(dest)
	switch {
	case p == nil:
	case atomicAdd:
		p.addAtomic(n)
	default:
		p.add(n)
	}
}

// sentTo returns the counters of comm rank dest's process and transport,
// or nil (a rank outside the communicator's map).
func (c *Comm) sentTo(dest int) *peerCount {
	if dest < 0 || dest >= len(c.world) {
		return nil
	}
	s := c.v.sent.Load()
	if s == nil {
		s = c.w.trackSent(c.v)
	}
	t := 1
	if c.link(dest) != nil {
		t = 0
	}
	wr := int(c.world[dest])
	if wr >= len(s.peers[t]) {
		return nil
	}
	return &s.peers[t][wr]
}

// trackSent gives v its counters (once) and keeps them for Stats, also
// after v is closed.
func (w *World) trackSent(v *vci) *sentStats {
	w.statsMu.Lock()
	defer w.statsMu.Unlock()
	if s := v.sent.Load(); s != nil {
		return s
	}
	n := len(w.hosts)
	s := &sentStats{peers: [2][]peerCount{make([]peerCount, n), make([]peerCount, n)}}
	w.sentAll = append(w.sentAll, s)
	v.sent.Store(s)
	return s
}

// Stats returns the point-to-point traffic this process has sent so far
// (see Stats): no traffic unless the world counts (WithStats,
// WithStatsDir, WEFT_STATS). It may be called from any goroutine, also
// after Close.
func (w *World) Stats() Stats {
	if w == nil {
		return Stats{}
	}
	w.statsMu.Lock()
	all := slices.Clone(w.sentAll)
	w.statsMu.Unlock()
	st := Stats{Rank: -1, Size: len(w.hosts)}
	if w.bs != nil {
		st.Rank = w.bs.Rank()
		if st.Rank >= 0 && st.Rank < len(w.hosts) {
			st.Host, _, _ = strings.Cut(w.hosts[st.Rank], "/") // the node key's host name, without its boot id
		}
	}
	for r := range st.Size {
		for t, name := range [2]string{TransportNode, TransportFabric} {
			var tr Traffic
			for _, s := range all {
				tr.Messages += s.peers[t][r].msgs.Load()
				tr.Bytes += s.peers[t][r].bytes.Load()
			}
			if tr.Messages > 0 {
				st.Peers = append(st.Peers, PeerTraffic{Rank: r, Transport: name, Traffic: tr})
				st.Sent.Messages += tr.Messages
				st.Sent.Bytes += tr.Bytes
			}
		}
	}
	return st
}

// World returns the world c belongs to (nil for a nil communicator).
func (c *Comm) World() *World {
	if c == nil {
		return nil
	}
	return c.w
}

// Counting reports whether the world counts its traffic (WithStats,
// WithStatsDir, WEFT_STATS): layers above endpoint count their own
// operations then too (StatsSection).
func (w *World) Counting() bool { return w != nil && w.cfg.stats }

// A Snapshotter is a section of the stats file: Snapshot returns what
// goes into it (encoded as JSON) when Close writes the file.
type Snapshotter interface {
	Snapshot() any
}

// StatsSection returns w's section name of the stats file Close writes
// for fabrun stats (under "layers"): made by mk at the first call for
// that name, the same value after, and ok false (no section) when w does
// not count. Layers above endpoint keep their counts this way, one value
// per world shared by all their handles (collectives: calls and time per
// collective; onesided: operations and bytes per kind; am: messages per
// handler). A section made under name with another type gives ok false.
func StatsSection[T Snapshotter](w *World, name string, mk func() T) (sec T, ok bool) {
	if !w.Counting() {
		return sec, false
	}
	w.statsMu.Lock()
	defer w.statsMu.Unlock()
	if v, found := w.layers[name]; found {
		sec, ok = v.(T)
		return sec, ok
	}
	if w.layers == nil {
		w.layers = map[string]Snapshotter{}
	}
	sec = mk()
	w.layers[name] = sec
	return sec, true
}

// statsFile is what writeStats writes: Stats and the layers' sections.
type statsFile struct {
	Stats
	Layers map[string]any `json:"layers,omitempty"`
}

// writeStats writes Stats into dir as weft-stats.RANK.json (EnvStats).
func (w *World) writeStats(dir string) error {
	st := statsFile{Stats: w.Stats()}
	w.statsMu.Lock()
	for name, sec := range w.layers {
		if st.Layers == nil {
			st.Layers = map[string]any{}
		}
		st.Layers[name] = sec.Snapshot()
	}
	w.statsMu.Unlock()
	b, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		return err
	}
	name := filepath.Join(dir, fmt.Sprintf("weft-stats.%d.json", st.Rank))
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("endpoint: %s: %w", EnvStats, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("endpoint: %s: %w", EnvStats, err)
	}
	return nil
}
