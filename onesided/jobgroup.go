package onesided

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/weft-hpc/weft/job"
)

var bootGroups atomic.Int64

// bootGroup is a Group over the job's key-value exchange.
type bootGroup struct {
	bs     job.Job
	prefix string
	seq    int
}

// JobGroup returns a Group spanning every rank of the job, built on
// the launcher's put/fence/get exchange: Barrier is a fence and Allgather
// is a put, a fence and one get per rank. It is slow (milliseconds) but
// needs nothing beyond the launcher, so windows work before any
// communicator exists. Groups must be created in the same order on every
// rank. The Group is for one goroutine at a time.
func JobGroup(j job.Job) Group {
	id := bootGroups.Add(1)
	return &bootGroup{bs: j, prefix: "os.g" + strconv.FormatInt(id, 10) + "."}
}

// Rank implements Group.
func (g *bootGroup) Rank() int { return g.bs.Rank() }

// Size implements Group.
func (g *bootGroup) Size() int { return g.bs.Size() }

// Barrier implements Group with a bootstrap fence.
func (g *bootGroup) Barrier(ctx context.Context) error {
	if err := g.bs.Fence(ctx); err != nil {
		return fmt.Errorf("onesided: bootstrap barrier: %w", err)
	}
	return nil
}

// Allgather implements Group: put, fence, one get per rank.
func (g *bootGroup) Allgather(ctx context.Context, data []byte) ([][]byte, error) {
	g.seq++
	key := g.prefix + strconv.Itoa(g.seq) + "."
	if err := g.bs.Put(key+strconv.Itoa(g.Rank()), data); err != nil {
		return nil, fmt.Errorf("onesided: bootstrap allgather: %w", err)
	}
	if err := g.bs.Fence(ctx); err != nil {
		return nil, fmt.Errorf("onesided: bootstrap allgather: %w", err)
	}
	out := make([][]byte, g.Size())
	for r := range out {
		if r == g.Rank() {
			out[r] = append([]byte(nil), data...)
			continue
		}
		v, err := g.bs.Get(ctx, key+strconv.Itoa(r))
		if err != nil {
			return nil, fmt.Errorf("onesided: bootstrap allgather from rank %d: %w", r, err)
		}
		out[r] = v
	}
	return out, nil
}
