package am

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/weft-hpc/weft/endpoint"
)

// profile counts a process's active messages per handler id, for the
// stats file fabrun stats reads (endpoint.StatsSection): messages
// sent (calls included) with their header and payload bytes, and
// messages handled. It exists only when the world counts
// (endpoint.WithStats, WEFT_STATS); the engines of one world share it.
type profile struct {
	ids sync.Map // handler id → *idCount
}

type idCount struct {
	sent, handled, bytes atomic.Uint64
}

// profileFor returns w's profile (made at the first engine); nil when
// w does not count.
func profileFor(w *endpoint.World) *profile {
	p, _ := endpoint.StatsSection(w, "am", func() *profile { return &profile{} })
	return p
}

func (p *profile) of(id int) *idCount {
	v, ok := p.ids.Load(id)
	if !ok {
		v, _ = p.ids.LoadOrStore(id, &idCount{})
	}
	return v.(*idCount)
}

// profileCount is one handler's line of the stats file.
type profileCount struct {
	Sent    uint64 `json:"sent"`
	Handled uint64 `json:"handled"`
	Bytes   uint64 `json:"bytes"` // header and payload bytes sent
}

// Snapshot is the stats file's section (endpoint.Snapshotter).
func (p *profile) Snapshot() any {
	out := map[string]profileCount{}
	p.ids.Range(func(k, v any) bool {
		c := v.(*idCount)
		out[strconv.Itoa(k.(int))] = profileCount{Sent: c.sent.Load(), Handled: c.handled.Load(), Bytes: c.bytes.Load()}
		return true
	})
	return out
}
