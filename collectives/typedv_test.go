package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// The typed v-collectives, reduce-scatters and scans, in the style of
// typedcoll_test.go: unit float64 values per element, layouts of three
// kinds (contiguous, a matrix column, an indexed type with holes) that
// differ between ranks and sides, every value checked against the serial
// reference and every hole checked untouched.

// setElems stores vals (packed order) into elements first, first+1, …
func (l *tlayout) setElems(first int, vals []float64) {
	for e := 0; e < len(vals)/unit; e++ {
		for j := 0; j < unit; j++ {
			l.v[l.pos(first+e, j)] = vals[e*unit+j]
		}
	}
}

// checkElems compares elements first … first+k-1 with want (packed order).
func (l *tlayout) checkElems(who string, first, k int, want []float64) error {
	for e := 0; e < k; e++ {
		for j := 0; j < unit; j++ {
			if got := l.v[l.pos(first+e, j)]; got != want[e*unit+j] {
				return fmt.Errorf("%s (%s): element %d value %d = %g, want %g", who, kindNames[l.kind], first+e, j, got, want[e*unit+j])
			}
		}
	}
	return nil
}

// vwhole is a v-collective's whole of kind k: counts[q] elements for rank
// q at element displs[q], one hole element between blocks.
type vwhole struct {
	*tlayout
	counts, displs []int
}

func newVWhole(kind int, counts []int) (*vwhole, error) {
	w := &vwhole{counts: counts, displs: make([]int, len(counts))}
	at := 0
	for q, n := range counts {
		w.displs[q] = at + 1
		at += n + 1
	}
	l, err := newTLayout(kind, at)
	w.tlayout = l
	return w, err
}

// want returns the whole's expected values: block(q) in rank q's block,
// hole in the gaps.
func (w *vwhole) want(block func(q int) []float64) []float64 {
	v := make([]float64, w.n*unit)
	for i := range v {
		v[i] = hole
	}
	for q := range w.counts {
		if b := block(q); b != nil {
			copy(v[w.displs[q]*unit:], b)
		}
	}
	return v
}

// vcnt is the count of rank q's block (or of the block between ranks q
// and j) at salt s: 0, 1 or 2 elements, symmetric in q and j.
func vcnt(q, j, s int) int { return (q + j + s) % 3 }

func typedVBattery(ctx context.Context, c *C.Coll, nb bool) error {
	p, me := c.Size(), c.Rank()
	wait := func(q *C.Request, err error) error {
		if err != nil {
			return err
		}
		return q.Wait(ctx)
	}
	for salt := 0; salt < 2; salt++ {
		for shift := 0; shift < numKinds; shift++ {
			ks, kr := (me+shift)%numKinds, (me+shift+1)%numKinds
			for _, inPlace := range []bool{false, true} {
				what := fmt.Sprintf("salt=%d send %s recv %s inPlace=%v", salt, kindNames[ks], kindNames[kr], inPlace)
				for _, root := range []int{0, p - 1} {
					if err := typedGatherv(ctx, c, nb, wait, salt, ks, kr, inPlace, root); err != nil {
						return fmt.Errorf("GathervTyped %s root=%d: %w", what, root, err)
					}
					if err := typedScatterv(ctx, c, nb, wait, salt, ks, kr, inPlace, root); err != nil {
						return fmt.Errorf("ScattervTyped %s root=%d: %w", what, root, err)
					}
				}
				if err := typedAllgatherv(ctx, c, nb, wait, salt, ks, kr, inPlace); err != nil {
					return fmt.Errorf("AllgathervTyped %s: %w", what, err)
				}
				if err := typedAlltoallv(ctx, c, nb, wait, salt, ks, kr, inPlace); err != nil {
					return fmt.Errorf("AlltoallvTyped %s: %w", what, err)
				}
				if err := typedReduceScatter(ctx, c, nb, wait, salt, ks, kr, inPlace); err != nil {
					return fmt.Errorf("ReduceScatterTyped %s: %w", what, err)
				}
				for _, excl := range []bool{false, true} {
					if err := typedScan(ctx, c, nb, wait, 2*salt+1, ks, kr, inPlace, excl); err != nil {
						return fmt.Errorf("ScanTyped (exclusive %v) %s: %w", excl, what, err)
					}
				}
			}
		}
	}
	return nil
}

func rankCounts(p, s int) []int {
	counts := make([]int, p)
	for q := range counts {
		counts[q] = vcnt(q, 0, s)
	}
	return counts
}

func typedGatherv(ctx context.Context, c *C.Coll, nb bool, wait waitFn, salt, ks, kr int, inPlace bool, root int) error {
	p, me := c.Size(), c.Rank()
	counts := rankCounts(p, salt)
	s, err := newTLayout(ks, counts[me])
	if err != nil {
		return err
	}
	s.set(vals(me, 0, counts[me]))
	w, err := newVWhole(kr, counts)
	if err != nil {
		return err
	}
	send := s.bytes()
	if inPlace && me == root {
		w.setElems(w.displs[me], vals(me, 0, counts[me]))
		send = nil
	}
	var recv []byte
	if me == root {
		recv = w.bytes()
	}
	if nb {
		err = wait(C.IgathervTyped(c, send, counts[me], s.t, recv, counts, w.displs, w.t, root))
	} else {
		err = C.GathervTyped(ctx, c, send, counts[me], s.t, recv, counts, w.displs, w.t, root)
	}
	if err != nil {
		return err
	}
	if err := s.check("send", vals(me, 0, counts[me])); err != nil {
		return err
	}
	if me != root {
		return w.untouched("non-root recv")
	}
	return w.check("recv", w.want(func(q int) []float64 { return vals(q, 0, counts[q]) }))
}

func typedScatterv(ctx context.Context, c *C.Coll, nb bool, wait waitFn, salt, ks, kr int, inPlace bool, root int) error {
	p, me := c.Size(), c.Rank()
	counts := rankCounts(p, salt)
	w, err := newVWhole(ks, counts)
	if err != nil {
		return err
	}
	whole := w.want(func(q int) []float64 { return vals(root, q, counts[q]) })
	if me == root {
		w.set(whole)
	}
	r, err := newTLayout(kr, counts[me])
	if err != nil {
		return err
	}
	recv := r.bytes()
	if inPlace && me == root {
		recv = nil
	}
	var send []byte
	if me == root {
		send = w.bytes()
	}
	if nb {
		err = wait(C.IscattervTyped(c, send, counts, w.displs, w.t, recv, counts[me], r.t, root))
	} else {
		err = C.ScattervTyped(ctx, c, send, counts, w.displs, w.t, recv, counts[me], r.t, root)
	}
	if err != nil {
		return err
	}
	if me == root {
		if err := w.check("send", whole); err != nil {
			return err
		}
	} else if err := w.untouched("non-root send"); err != nil {
		return err
	}
	if recv == nil {
		return r.untouched("in-place root's recv")
	}
	return r.check("recv", vals(root, me, counts[me]))
}

func typedAllgatherv(ctx context.Context, c *C.Coll, nb bool, wait waitFn, salt, ks, kr int, inPlace bool) error {
	p, me := c.Size(), c.Rank()
	counts := rankCounts(p, salt+1)
	s, err := newTLayout(ks, counts[me])
	if err != nil {
		return err
	}
	s.set(vals(me, 0, counts[me]))
	w, err := newVWhole(kr, counts)
	if err != nil {
		return err
	}
	send := s.bytes()
	if inPlace {
		w.setElems(w.displs[me], vals(me, 0, counts[me]))
		send = nil
	}
	if nb {
		err = wait(C.IallgathervTyped(c, send, counts[me], s.t, w.bytes(), counts, w.displs, w.t))
	} else {
		err = C.AllgathervTyped(ctx, c, send, counts[me], s.t, w.bytes(), counts, w.displs, w.t)
	}
	if err != nil {
		return err
	}
	return w.check("recv", w.want(func(q int) []float64 { return vals(q, 0, counts[q]) }))
}

func typedAlltoallv(ctx context.Context, c *C.Coll, nb bool, wait waitFn, salt, ks, kr int, inPlace bool) error {
	p, me := c.Size(), c.Rank()
	cnt := make([]int, p) // what this rank sends rank j and receives from it (symmetric)
	for j := range cnt {
		cnt[j] = vcnt(me, j, salt)
	}
	sw, err := newVWhole(ks, cnt)
	if err != nil {
		return err
	}
	sw.set(sw.want(func(j int) []float64 { return vals(me, j, cnt[j]) }))
	rw, err := newVWhole(kr, cnt)
	if err != nil {
		return err
	}
	send, sc, sd, st := sw.bytes(), cnt, sw.displs, sw.t
	if inPlace {
		rw.set(rw.want(func(j int) []float64 { return vals(me, j, cnt[j]) }))
		send, sc, sd, st = nil, nil, nil, nil
	}
	if nb {
		err = wait(C.IalltoallvTyped(c, send, sc, sd, st, rw.bytes(), cnt, rw.displs, rw.t))
	} else {
		err = C.AlltoallvTyped(ctx, c, send, sc, sd, st, rw.bytes(), cnt, rw.displs, rw.t)
	}
	if err != nil {
		return err
	}
	return rw.check("recv", rw.want(func(i int) []float64 { return vals(i, me, cnt[i]) }))
}

// typedReduceScatter: ReduceScatterTyped with per-rank counts (0, 1, 2
// elements), and ReduceScatterBlockTyped of 1 element per rank. A
// reduction takes one datatype per rank for send and recv (MPI's); the
// kinds differ between ranks.
func typedReduceScatter(ctx context.Context, c *C.Coll, nb bool, wait waitFn, salt, ks, kr int, inPlace bool) error {
	p, me := c.Size(), c.Rank()
	for _, block := range []bool{false, true} {
		counts := rankCounts(p, salt)
		if block {
			counts = slices.Repeat([]int{1}, p)
		}
		total := 0
		offs := make([]int, p+1)
		for q, n := range counts {
			offs[q+1] = offs[q] + n
			total += n
		}
		sums := make([]float64, total*unit)
		for r := 0; r < p; r++ {
			for i, x := range vals(r, 0, total) {
				sums[i] += x
			}
		}
		want := sums[offs[me]*unit : offs[me+1]*unit]
		s, err := newTLayout(ks, total)
		if err != nil {
			return err
		}
		s.set(vals(me, 0, total))
		// recv: the same datatype over a buffer of total elements (the
		// column type's stride depends on it), the result in the first
		// counts[me] and the others untouched
		r := s
		send := s.v
		if inPlace {
			send = nil
		} else if r, err = newTLayout(ks, total); err != nil {
			return err
		}
		switch {
		case block && nb:
			err = wait(C.IreduceScatterBlockTyped(c, send, r.v, 1, s.t, C.Sum[float64]()))
		case block:
			err = C.ReduceScatterBlockTyped(ctx, c, send, r.v, 1, s.t, C.Sum[float64]())
		case nb:
			err = wait(C.IreduceScatterTyped(c, send, r.v, counts, s.t, C.Sum[float64]()))
		default:
			err = C.ReduceScatterTyped(ctx, c, send, r.v, counts, s.t, C.Sum[float64]())
		}
		if err != nil {
			return fmt.Errorf("block=%v: %w", block, err)
		}
		if !inPlace {
			if err := s.check("send", vals(me, 0, total)); err != nil {
				return err
			}
			full := make([]float64, total*unit)
			for i := range full {
				full[i] = hole
			}
			copy(full, want)
			if err := r.check("recv", full); err != nil {
				return err
			}
		} else if err := r.checkElems("recv", 0, counts[me], want); err != nil {
			return err
		}
	}
	return nil
}

// scanVals is rank r's contribution to typedScan: n elements of unit
// values, read in pairs (a, b) as the affine maps x ↦ a·x + b, with small
// a and b so that every composition is exact.
func scanVals(r, n int) []float64 {
	v := make([]float64, n*unit)
	for i := range v {
		if i%2 == 0 {
			v[i] = float64((r+i)%2 + 1)
		} else {
			v[i] = float64((3*r+i)%5 - 2)
		}
	}
	return v
}

// composeAff is the composition of affine maps (x ↦ a·x + b pairs):
// first inout's, then in's. Associative, not commutative.
var composeAff = C.NewOp("affine", func(inout, in []float64) {
	for i := 0; i+1 < len(inout); i += 2 {
		inout[i], inout[i+1] = inout[i]*in[i], in[i]*inout[i+1]+in[i+1]
	}
}, false)

// typedScan: ScanTyped or ExscanTyped of n elements with a
// non-commutative operation (composeAff), so that rank order is checked.
func typedScan(ctx context.Context, c *C.Coll, nb bool, wait waitFn, n, ks, kr int, inPlace, excl bool) error {
	me := c.Rank()
	op := composeAff
	last := me
	if excl {
		last = me - 1
	}
	var want []float64
	for r := 0; r <= last; r++ {
		v := scanVals(r, n)
		if want == nil {
			want = v
			continue
		}
		if err := op.Apply(want, v); err != nil {
			return err
		}
	}
	s, err := newTLayout(ks, n)
	if err != nil {
		return err
	}
	s.set(scanVals(me, n))
	r := s
	send := s.v
	if inPlace {
		send = nil
	} else if r, err = newTLayout(ks, n); err != nil {
		return err
	}
	call := C.ScanTyped[float64]
	icall := C.IscanTyped[float64]
	if excl {
		call, icall = C.ExscanTyped[float64], C.IexscanTyped[float64]
	}
	if nb {
		err = wait(icall(c, send, r.v, n, s.t, op))
	} else {
		err = call(ctx, c, send, r.v, n, s.t, op)
	}
	if err != nil {
		return err
	}
	switch {
	case excl && me == 0 && inPlace:
		return r.check("rank 0's recv", scanVals(0, n))
	case excl && me == 0:
		return r.untouched("rank 0's recv")
	}
	return r.check("recv", want)
}

// TestTypedVHandles: the typed v-collectives, reduce-scatters and scans
// over the endpoint handles of one process (the v-forms through the
// process level of the hierarchy), p = 1 to 5 and 7, blocking, and
// nonblocking for p = 3 and 4 (the progress goroutine on for 3).
func TestTypedVHandles(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4, 5, 7} {
		for _, nb := range []bool{false, true} {
			if nb && p != 3 && p != 4 {
				continue
			}
			var o []C.Option
			if nb && p == 3 {
				o = append(o, C.WithProgress(true))
			}
			t.Run(fmt.Sprintf("p%d/nb=%v", p, nb), func(t *testing.T) {
				runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, p), o, func(ctx context.Context, c *C.Coll) error {
					if p > 1 && !c.Hierarchical(C.CollAllgatherv) {
						return fmt.Errorf("Allgatherv is not hierarchical over %d handles of one process", p)
					}
					return typedVBattery(ctx, c, nb)
				})
			})
		}
	}
}

// TestTypedVProcs: the same over 2 processes (node transport): one rank
// per process (flat), then 2 handles per process (the process level,
// the process leaders exchanging on the private communicator), and the
// communicator Split makes with the processes' ranks interleaved.
func TestTypedVProcs(t *testing.T) {
	if launchtest.RunOn(t, 2, "native", 60*time.Second) {
		return
	}
	w, ctx, c := worldColl(t)
	if err := typedVBattery(ctx, c, false); err != nil {
		t.Fatalf("processes: %v", err)
	}
	if err := c.Free(); err != nil {
		t.Fatal(err)
	}
	eps, err := w.Comm().CreateEndpoints(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, e := range eps {
			e.Free()
		}
	}()
	runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		if !c.Hierarchical(C.CollAllgatherv) {
			return fmt.Errorf("Allgatherv is not hierarchical over 2 processes × 2 handles")
		}
		if err := typedVBattery(ctx, c, false); err != nil {
			return err
		}
		if err := typedBattery(ctx, c, false); err != nil { // the other typed forms through the hierarchy
			return err
		}
		if !launchtest.Short() {
			if err := typedVBattery(ctx, c, true); err != nil {
				return fmt.Errorf("nonblocking: %w", err)
			}
		}
		q, h := c.Rank()/2, c.Rank()%2
		sub, err := c.Comm().Split(ctx, 0, h*2+q)
		if err != nil {
			return err
		}
		defer sub.Free()
		sc, err := C.New(ctx, sub)
		if err != nil {
			return err
		}
		if err := typedVBattery(ctx, sc, false); err != nil {
			return fmt.Errorf("interleaved: %w", err)
		}
		return sc.Free()
	})
	// Counts that disagree across processes, with the same total: rank 2
	// sends nothing and rank 3 two elements where the root's counts say
	// one each. The root's leader finds it in the message's lengths.
	errs, took := each(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		s, err := newTLayout(kindContig, 2)
		if err != nil {
			return err
		}
		w, err := newVWhole(kindColumn, []int{1, 1, 1, 1})
		if err != nil {
			return err
		}
		n := []int{1, 1, 0, 2}[c.Rank()]
		return C.GathervTyped(ctx, c, s.bytes(), n, s.t, w.bytes(), w.counts, w.displs, w.t, 0)
	})
	for i, err := range errs {
		r := eps[i].Rank()
		if r == 0 && !errors.Is(err, C.ErrInvalid) {
			t.Errorf("rank 0 (the root): %v, want ErrInvalid", err)
		}
		if err != nil && !errors.Is(err, C.ErrInvalid) && !errors.Is(err, C.ErrCanceled) {
			t.Errorf("rank %d: %v", r, err)
		}
		if took[i] > quick {
			t.Errorf("rank %d took %v", r, took[i])
		}
	}
}

// TestTypedVErrors: typed v-calls whose counts or types disagree between
// ranks, or whose layouts are bad, fail with ErrInvalid (ErrOutOfRange,
// ErrTruncated for a message longer than its receive) on the ranks that
// can see it and never hang; through the hierarchy (handles of one
// process) and flat (HierOff).
func TestTypedVErrors(t *testing.T) {
	const p = 3
	i64col := committed(t)(ddt.Vector(unit, 1, 3, ddt.Int64))
	cases := []struct {
		name string
		call func(ctx context.Context, c *C.Coll) error
		self []int // ranks that must see the error themselves
	}{
		{"gatherv: rank 1 sends 2 elements, the root's counts say 1", func(ctx context.Context, c *C.Coll) error {
			s, _ := newTLayout(kindContig, 2)
			w, _ := newVWhole(kindColumn, []int{1, 1, 1})
			n := 1
			if c.Rank() == 1 {
				n = 2
			}
			return C.GathervTyped(ctx, c, s.bytes(), n, s.t, w.bytes(), w.counts, w.displs, w.t, 0)
		}, []int{0}},
		{"gatherv: ranks 1 and 2 swap counts (same total)", func(ctx context.Context, c *C.Coll) error {
			s, _ := newTLayout(kindContig, 2)
			w, _ := newVWhole(kindContig, []int{1, 1, 2})
			n := []int{1, 2, 1}[c.Rank()]
			return C.GathervTyped(ctx, c, s.bytes(), n, s.t, w.bytes(), w.counts, w.displs, w.t, 0)
		}, []int{0}},
		{"scatterv: rank 2 expects 2 elements, the root sends 1", func(ctx context.Context, c *C.Coll) error {
			w, _ := newVWhole(kindIndexed, []int{1, 1, 1})
			r, _ := newTLayout(kindContig, 2)
			n := 1
			if c.Rank() == 2 {
				n = 2
			}
			return C.ScattervTyped(ctx, c, w.bytes(), w.counts, w.displs, w.t, r.bytes(), n, r.t, 1)
		}, []int{2}},
		{"allgatherv: rank 0's counts differ", func(ctx context.Context, c *C.Coll) error {
			counts := []int{1, 1, 1}
			if c.Rank() == 0 {
				counts = []int{1, 2, 1}
			}
			s, _ := newTLayout(kindContig, 1)
			w, _ := newVWhole(kindContig, counts)
			return C.AllgathervTyped(ctx, c, s.bytes(), 1, s.t, w.bytes(), counts, w.displs, w.t)
		}, []int{0}},
		{"allgatherv: overlapping receive blocks", func(ctx context.Context, c *C.Coll) error {
			s, _ := newTLayout(kindContig, 1)
			w, _ := newVWhole(kindContig, []int{1, 1, 1})
			return C.AllgathervTyped(ctx, c, s.bytes(), 1, s.t, w.bytes(), w.counts, []int{0, 0, 2}, w.t)
		}, []int{0, 1, 2}},
		{"alltoallv: a block outside recv", func(ctx context.Context, c *C.Coll) error {
			w, _ := newVWhole(kindColumn, []int{1, 1, 1})
			return C.AlltoallvTyped(ctx, c, nil, nil, nil, nil, w.bytes(), w.counts, []int{1, 3, 9}, w.t)
		}, []int{0, 1, 2}},
		{"reduce-scatter of float64 over an int64 column", func(ctx context.Context, c *C.Coll) error {
			v := make([]float64, unit*3)
			return C.ReduceScatterBlockTyped(ctx, c, nil, v, 1, i64col, C.Sum[float64]())
		}, []int{0, 1, 2}},
		{"gatherv: rank 2's send type is nil (a local error, the others in the call)", func(ctx context.Context, c *C.Coll) error {
			s, _ := newTLayout(kindContig, 1)
			w, _ := newVWhole(kindColumn, []int{1, 1, 1})
			st := s.t
			if c.Rank() == 2 {
				st = nil
			}
			return C.GathervTyped(ctx, c, s.bytes(), 1, st, w.bytes(), w.counts, w.displs, w.t, 0)
		}, []int{2}},
		{"allgatherv: rank 1's receive layout is outside its buffer (a local error)", func(ctx context.Context, c *C.Coll) error {
			s, _ := newTLayout(kindContig, 1)
			w, _ := newVWhole(kindContig, []int{1, 1, 1})
			displs := w.displs
			if c.Rank() == 1 {
				displs = []int{0, 1, 1 << 20}
			}
			return C.AllgathervTyped(ctx, c, s.bytes(), 1, s.t, w.bytes(), w.counts, displs, w.t)
		}, []int{1}},
		{"scan: rank 2 scans 2 elements, the others 1", func(ctx context.Context, c *C.Coll) error {
			l, _ := newTLayout(kindIndexed, 2)
			n := 1
			if c.Rank() == 2 {
				n = 2
			}
			return C.ScanTyped(ctx, c, nil, l.v, n, l.t, C.Sum[float64]())
		}, []int{0, 2}}, // rank 1 exchanges with rank 0 only
	}
	for _, mode := range []C.Hierarchy{C.HierAuto, C.HierOff} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%v/%s", mode, tc.name), func(t *testing.T) {
				errs, took := each(t, eptest.Ctx(t, 30*time.Second), handles(t, p), []C.Option{C.WithHierarchy(mode)}, tc.call)
				for i, err := range errs {
					own := errors.Is(err, C.ErrInvalid) || errors.Is(err, C.ErrOutOfRange) || errors.Is(err, C.ErrTruncated)
					if slices.Contains(tc.self, i) && !own {
						t.Errorf("rank %d: %v, want ErrInvalid, ErrOutOfRange or ErrTruncated", i, err)
					}
					if err != nil && !own && !errors.Is(err, C.ErrCanceled) {
						t.Errorf("rank %d: %v", i, err)
					}
					if took[i] > quick {
						t.Errorf("rank %d took %v", i, took[i])
					}
				}
			})
		}
	}
}

// BenchmarkGathervHandles: a Gatherv of 16 bytes per rank (2 float64,
// rank 0 the root) over 4 handles of one process, through the process
// level (hier=auto) or flat (hier=off), beside Gather; typed, GathervTyped and
// GatherTyped into the columns of a 2×4 matrix at the root (a column type
// resized to one float64).
func BenchmarkGathervHandles(b *testing.B) {
	for _, form := range []string{"Gather", "Gatherv", "GathervTyped", "GatherTyped"} {
		for _, h := range []C.Hierarchy{C.HierAuto, C.HierOff} {
			b.Run(fmt.Sprintf("%s/hier=%s", form, h), func(b *testing.B) {
				const p = 4
				col := committed(b)(ddt.Vector(2, 1, p, ddt.Float64))
				col = committed(b)(ddt.Resized(col, 0, 8))
				counts, displs := []int{2, 2, 2, 2}, []int{0, 2, 4, 6}
				ccounts, cdispls := []int{1, 1, 1, 1}, []int{0, 1, 2, 3}
				eps := handles(b, p)
				errs := onHandles(context.Background(), eps, []C.Option{C.WithHierarchy(h)}, func(ctx context.Context, c *C.Coll) error {
					x := []float64{float64(c.Rank()), 1}
					all := make([]float64, 2*p)
					if c.Rank() == 0 {
						b.ResetTimer()
					}
					for i := 0; i < b.N; i++ {
						var err error
						switch form {
						case "Gather":
							err = C.Gather(ctx, c, x, all, 0)
						case "Gatherv":
							err = C.Gatherv(ctx, c, x, all, counts, displs, 0)
						case "GathervTyped":
							err = C.GathervTyped(ctx, c, bytesOf(x), 2, ddt.Float64, bytesOf(all), ccounts, cdispls, col, 0)
						default:
							err = C.GatherTyped(ctx, c, bytesOf(x), 2, ddt.Float64, bytesOf(all), 1, col, 0)
						}
						if err != nil {
							return err
						}
					}
					return nil
				})
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
