package collectives

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weft-hpc/weft/internal/wlog"
)

// TuneConfig says what Tune measures. Zero fields take the defaults.
type TuneConfig struct {
	// Collectives to tune (default: every one with a choice by size:
	// CollBcast, CollReduce, CollAllreduce, CollGather, CollScatter,
	// CollAllgather, CollAllgatherv, CollAlltoall).
	Collectives []Collective
	// Sizes in bytes per rank, as the OSU loops count them: the message
	// of Bcast, Reduce and Allreduce (float32 elements), each rank's
	// block of Gather, Scatter, Allgather(v) and Alltoall (default 8 B to
	// 1 MiB by factors of 8).
	Sizes []int
	// Iters is the number of timed calls per algorithm and size (default
	// 20; a quarter, at least 3, above 64 KiB), after Iters/5 untimed.
	Iters int
}

// TuneMeasure is one measurement of Tune: the median time of a call of
// one algorithm, the largest over the ranks.
type TuneMeasure struct {
	Collective Collective
	Size       int // bytes per rank, as TuneConfig.Sizes
	Selection  int // the size the selection sees (the table's sizes)
	Algorithm  Algorithm
	Time       time.Duration
	Chosen     bool // the algorithm the table picks for this size
}

// tuneMargin is how much faster than the default choice another
// algorithm must be for Tune to choose it: timing noise alone does not
// change the selection.
const tuneMargin = 0.9

// tuneChoice picks among k's algorithms timed ts: the fastest where it is
// faster than tuneMargin times the default choice def, else def.
func tuneChoice(k Collective, ts []time.Duration, def Algorithm) Algorithm {
	best, di := 0, slices.Index(algs[k], def)
	for i := range ts {
		if ts[i] < ts[best] {
			best = i
		}
	}
	if di >= 0 && float64(ts[best]) >= tuneMargin*float64(ts[di]) {
		return def
	}
	return algs[k][best]
}

// tunable are the collectives with a choice by size.
var tunable = []Collective{CollBcast, CollReduce, CollAllreduce, CollGather, CollScatter,
	CollAllgather, CollAllgatherv, CollAlltoall}

// Tune measures every algorithm of the configured collectives at every
// size on c's communicator and returns the selection table that picks,
// per size, the fastest (a rule for c.Size() ranks per collective; its
// steps start at the first measured size where the choice changes), with
// the measurements. Where the fastest is not 10% faster than the
// algorithm the thresholds pick, the table keeps the latter: noise does
// not change the selection. It is collective: every rank calls it with the same
// configuration, and every rank gets the same table. Progress goes to
// the weft log (WEFT_LOG_LEVEL=info) from rank 0. The handle's
// algorithm settings are restored afterwards; its hierarchical paths are
// not measured (a forced algorithm runs flat).
func Tune(ctx context.Context, c *Coll, tc TuneConfig) (*Table, []TuneMeasure, error) {
	if c == nil || c.comm == nil {
		return nil, nil, fmt.Errorf("collectives: Tune on a nil handle: %w", ErrInvalid)
	}
	colls, sizes, iters := tc.Collectives, tc.Sizes, tc.Iters
	if len(colls) == 0 {
		colls = tunable
	}
	if len(sizes) == 0 {
		for s := 8; s <= 1<<20; s *= 8 {
			sizes = append(sizes, s)
		}
	}
	if iters == 0 {
		iters = 20
	}
	for _, k := range colls {
		if !slices.Contains(tunable, k) {
			return nil, nil, fmt.Errorf("collectives: Tune: %v has no choice by size: %w", k, ErrInvalid)
		}
	}
	if iters < 1 || slices.ContainsFunc(sizes, func(s int) bool { return s < 0 || s > 1<<30 }) {
		return nil, nil, fmt.Errorf("collectives: Tune: sizes %v, %d iterations: %w", sizes, iters, ErrInvalid)
	}
	sizes = slices.Sorted(slices.Values(sizes))
	sizes = slices.Compact(sizes)
	log := wlog.Named("collectives")
	saved := c.cfg.alg
	defer func() { c.cfg.alg = saved }()
	p := c.size
	maxSize := sizes[len(sizes)-1]
	send, recv := make([]byte, max(p*maxSize, 8)), make([]byte, max(p*maxSize, 8))
	// Written once, as an application's data are: untouched memory reads
	// as the kernel's one zero page, hot in the cache, and would make the
	// copies that read it (another process's process_vm_readv too) look
	// faster than they are on real data.
	for _, b := range [][]byte{send, recv} {
		for i := range b {
			b[i] = 1
		}
	}
	def := c.cfg // the selection without a table
	def.alg, def.table = [numColl]Algorithm{}, nil
	table := &Table{}
	var all []TuneMeasure
	start := time.Now()
	for ki, k := range colls {
		var steps []TableStep
		for _, size := range sizes {
			n := iters
			if size > 64<<10 {
				n = max(iters/4, 3)
			}
			ts, err := tuneTimes(ctx, c, k, send, recv, size, n)
			if err != nil {
				return nil, nil, fmt.Errorf("collectives: Tune: %s %d B: %w", k, size, err)
			}
			sel := selectionSize(k, size, p)
			chosen := tuneChoice(k, ts, def.pick(k, sel, p))
			var line []string
			for i, a := range algs[k] {
				all = append(all, TuneMeasure{Collective: k, Size: size, Selection: sel, Algorithm: a, Time: ts[i], Chosen: a == chosen})
				line = append(line, fmt.Sprintf("%s %v", a, ts[i]))
			}
			if len(steps) == 0 {
				steps = append(steps, TableStep{From: 0, Algorithm: chosen})
			} else if steps[len(steps)-1].Algorithm != chosen {
				steps = append(steps, TableStep{From: sel, Algorithm: chosen})
			}
			if c.rank == 0 {
				log.Info("tune", "collective", k.String(), "ranks", p, "size", size, "times", strings.Join(line, ", "), "chosen", chosen.String(),
					"done", fmt.Sprintf("%d/%d collectives", ki, len(colls)), "elapsed", time.Since(start).Round(time.Millisecond))
			}
		}
		if err := table.Set(k, p, steps); err != nil {
			return nil, nil, err
		}
	}
	return table, all, nil
}

// selectionSize is the size the selection of k sees for a call of size
// bytes per rank on p ranks (select.go's pick).
func selectionSize(k Collective, size, p int) int {
	switch k {
	case CollAllgather, CollAllgatherv:
		return p * size
	}
	return size
}

// tuneTimes times each of k's algorithms: n rounds (after n/5 untimed)
// of one call of each algorithm in turn, each call followed by a barrier,
// so that load that comes and goes weighs on all alike. It returns per
// algorithm the largest over the ranks of each rank's median call time.
func tuneTimes(ctx context.Context, c *Coll, k Collective, sb, rb []byte, size, n int) ([]time.Duration, error) {
	p := c.size
	f32 := func(b []byte) []float32 { return elems[float32](b[:size/4*4]) }
	var call func() error
	switch k {
	case CollBcast:
		call = func() error { return Bcast(ctx, c, sb[:size], 0) }
	case CollReduce:
		call = func() error { return Reduce(ctx, c, f32(sb), f32(rb), Sum[float32](), 0) }
	case CollAllreduce:
		call = func() error { return Allreduce(ctx, c, f32(sb), f32(rb), Sum[float32]()) }
	case CollGather:
		call = func() error { return Gather(ctx, c, sb[:size], rb[:p*size], 0) }
	case CollScatter:
		call = func() error { return Scatter(ctx, c, sb[:p*size], rb[:size], 0) }
	case CollAllgather:
		call = func() error { return Allgather(ctx, c, sb[:size], rb[:p*size]) }
	case CollAllgatherv:
		counts, displs := make([]int, p), make([]int, p)
		for i := range counts {
			counts[i], displs[i] = size, i*size
		}
		call = func() error { return Allgatherv(ctx, c, sb[:size], rb[:p*size], counts, displs) }
	case CollAlltoall:
		call = func() error { return Alltoall(ctx, c, sb[:p*size], rb[:p*size]) }
	}
	as := algs[k]
	ts := make([][]time.Duration, len(as))
	saved := c.cfg.alg[k]
	defer func() { c.cfg.alg[k] = saved }()
	for i := 0; i < n/5+n; i++ {
		for j, a := range as {
			c.cfg.alg[k] = a
			t0 := time.Now()
			if err := call(); err != nil {
				return nil, fmt.Errorf("%s: %w", a, err)
			}
			if el := time.Since(t0); i >= n/5 {
				ts[j] = append(ts[j], el)
			}
			if err := Barrier(ctx, c); err != nil {
				return nil, err
			}
		}
	}
	med := make([]int64, len(as))
	for j := range ts {
		slices.Sort(ts[j])
		med[j] = int64(ts[j][len(ts[j])/2])
	}
	if err := Allreduce(ctx, c, nil, med, Max[int64]()); err != nil {
		return nil, err
	}
	out := make([]time.Duration, len(as))
	for j := range med {
		out[j] = time.Duration(med[j])
	}
	return out, nil
}
