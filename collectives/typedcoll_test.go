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
	"github.com/weft-hpc/weft/internal/testenv"
)

// Layouts of the typed tests. Every element carries unit float64 values
// (its packed data), so elements of the three kinds pack alike and a
// send of one kind matches a receive of another (MPI's type signature
// rule):
//
//   - kindContig: unit contiguous values per element;
//   - kindColumn: a column of a row-major matrix of unit rows and n+1
//     columns (n elements: columns 0..n-1, the last column a hole); the
//     ddt.Vector resized to one float64 so that element k is column k;
//   - kindIndexed: a ddt.Indexed of blocks 2, 1, 3 at 0, 3, 7 in an
//     extent of 10 values (holes between and after).
const (
	kindContig = iota
	kindColumn
	kindIndexed
	numKinds

	unit = 6
	hole = -1.5 // what a hole holds before and must hold after
)

var kindNames = [numKinds]string{"contig", "column", "indexed"}

// tlayout is n elements of a kind over a []float64.
type tlayout struct {
	kind, n int
	t       *ddt.Type
	v       []float64
}

var indexedPos = [unit]int{0, 1, 3, 7, 8, 9}

func newTLayout(kind, n int) (*tlayout, error) {
	l := &tlayout{kind: kind, n: n}
	var err error
	switch kind {
	case kindContig:
		l.t, err = ddt.Contiguous(unit, ddt.Float64)
		l.v = make([]float64, unit*n)
	case kindColumn:
		var col *ddt.Type
		if col, err = ddt.Vector(unit, 1, n+1, ddt.Float64); err == nil {
			l.t, err = ddt.Resized(col, 0, 8)
		}
		l.v = make([]float64, unit*(n+1))
	case kindIndexed:
		l.t, err = ddt.Indexed([]int{2, 1, 3}, []int{0, 3, 7}, ddt.Float64)
		l.v = make([]float64, 10*n)
	}
	if err == nil {
		err = l.t.Commit()
	}
	for i := range l.v {
		l.v[i] = hole
	}
	return l, err
}

// pos is the index in v of value j of element e.
func (l *tlayout) pos(e, j int) int {
	switch l.kind {
	case kindColumn:
		return j*(l.n+1) + e
	case kindIndexed:
		return 10*e + indexedPos[j]
	}
	return unit*e + j
}

// set stores vals (n·unit values, in packed order) into the layout.
func (l *tlayout) set(vals []float64) {
	for e := 0; e < l.n; e++ {
		for j := 0; j < unit; j++ {
			l.v[l.pos(e, j)] = vals[e*unit+j]
		}
	}
}

// check compares the layout's values with want (packed order) and its
// holes with hole.
func (l *tlayout) check(who string, want []float64) error {
	in := make([]bool, len(l.v))
	for e := 0; e < l.n; e++ {
		for j := 0; j < unit; j++ {
			i := l.pos(e, j)
			in[i] = true
			if l.v[i] != want[e*unit+j] {
				return fmt.Errorf("%s (%s): element %d value %d = %g, want %g", who, kindNames[l.kind], e, j, l.v[i], want[e*unit+j])
			}
		}
	}
	for i, x := range l.v {
		if !in[i] && x != hole {
			return fmt.Errorf("%s (%s): hole at %d overwritten with %g", who, kindNames[l.kind], i, x)
		}
	}
	return nil
}

// untouched checks that nothing was written into the layout's buffer.
func (l *tlayout) untouched(who string) error {
	for i, x := range l.v {
		if x != hole {
			return fmt.Errorf("%s (%s): value %d overwritten with %g", who, kindNames[l.kind], i, x)
		}
	}
	return nil
}

func (l *tlayout) bytes() []byte { return bytesOf(l.v) }

// vals returns n·unit values of rank r for block b: r·1000 + b·100 + i.
func vals(r, b, n int) []float64 {
	v := make([]float64, n*unit)
	for i := range v {
		v[i] = float64(r*1000 + b*100 + i + 1)
	}
	return v
}

// typedBattery runs every typed form on c, each rank's send and receive
// layouts of kinds that differ between ranks and between send and
// receive, in place and not, roots first and last, through the blocking
// or the nonblocking (nb) forms, each result checked against the serial
// reference on every rank.
func typedBattery(ctx context.Context, c *C.Coll, nb bool) error {
	p, me := c.Size(), c.Rank()
	wait := func(q *C.Request, err error) error {
		if err != nil {
			return err
		}
		return q.Wait(ctx)
	}
	for _, n := range []int{0, 2} {
		for shift := 0; shift < numKinds; shift++ {
			ks, kr := (me+shift)%numKinds, (me+shift+1)%numKinds
			for _, inPlace := range []bool{false, true} {
				for _, root := range []int{0, p - 1} {
					what := fmt.Sprintf("n=%d send %s recv %s inPlace=%v root=%d", n, kindNames[ks], kindNames[kr], inPlace, root)
					if err := typedGather(ctx, c, nb, wait, n, ks, kr, inPlace, root); err != nil {
						return fmt.Errorf("GatherTyped %s: %w", what, err)
					}
					if err := typedScatter(ctx, c, nb, wait, n, ks, kr, inPlace, root); err != nil {
						return fmt.Errorf("ScatterTyped %s: %w", what, err)
					}
					if err := typedReduce(ctx, c, nb, wait, n, ks, inPlace, root); err != nil {
						return fmt.Errorf("ReduceTyped %s: %w", what, err)
					}
				}
				what := fmt.Sprintf("n=%d send %s recv %s inPlace=%v", n, kindNames[ks], kindNames[kr], inPlace)
				if err := typedAllgather(ctx, c, nb, wait, n, ks, kr, inPlace); err != nil {
					return fmt.Errorf("AllgatherTyped %s: %w", what, err)
				}
				if err := typedAlltoall(ctx, c, nb, wait, n, ks, kr, inPlace); err != nil {
					return fmt.Errorf("AlltoallTyped %s: %w", what, err)
				}
				if err := typedAllreduce(ctx, c, nb, wait, n, kr, inPlace); err != nil {
					return fmt.Errorf("AllreduceTyped %s: %w", what, err)
				}
			}
		}
	}
	return nil
}

type waitFn func(*C.Request, error) error

// concat is the values of every rank's block for rank dst (dst < 0: block
// 0), in rank order.
func concat(p, dst, n int) []float64 {
	var all []float64
	for r := 0; r < p; r++ {
		all = append(all, vals(r, max(dst, 0), n)...)
	}
	return all
}

// ownAndWhole makes rank me's layout of n elements (kind ks) holding its
// values, and a layout of p·n elements (kind kr) to gather into.
func ownAndWhole(p, me, n, ks, kr int) (s, r *tlayout, err error) {
	if s, err = newTLayout(ks, n); err != nil {
		return nil, nil, err
	}
	s.set(vals(me, 0, n))
	r, err = newTLayout(kr, p*n)
	return s, r, err
}

// setOwn stores, for an in-place gather, rank me's values in its block of
// the p·n elements and -7 in the others'.
func (l *tlayout) setOwn(p, me, n int) {
	own := make([]float64, p*n*unit)
	for i := range own {
		own[i] = -7
	}
	copy(own[me*n*unit:], vals(me, 0, n))
	l.set(own)
}

func typedGather(ctx context.Context, c *C.Coll, nb bool, wait waitFn, n, ks, kr int, inPlace bool, root int) error {
	p, me := c.Size(), c.Rank()
	s, r, err := ownAndWhole(p, me, n, ks, kr)
	if err != nil {
		return err
	}
	send := s.bytes()
	if inPlace && me == root {
		r.setOwn(p, me, n)
		send = nil
	}
	if nb {
		err = wait(C.IgatherTyped(c, send, n, s.t, r.bytes(), n, r.t, root))
	} else {
		err = C.GatherTyped(ctx, c, send, n, s.t, r.bytes(), n, r.t, root)
	}
	if err != nil || me != root {
		return err
	}
	return r.check("recv", concat(p, -1, n))
}

func typedScatter(ctx context.Context, c *C.Coll, nb bool, wait waitFn, n, ks, kr int, inPlace bool, root int) error {
	p, me := c.Size(), c.Rank()
	s, err := newTLayout(ks, p*n)
	if err != nil {
		return err
	}
	var all []float64
	for r := 0; r < p; r++ {
		all = append(all, vals(root, r, n)...)
	}
	if me == root {
		s.set(all)
	}
	r, err := newTLayout(kr, n)
	if err != nil {
		return err
	}
	recv := r.bytes()
	if inPlace && me == root {
		recv = nil
	}
	if nb {
		err = wait(C.IscatterTyped(c, s.bytes(), n, s.t, recv, n, r.t, root))
	} else {
		err = C.ScatterTyped(ctx, c, s.bytes(), n, s.t, recv, n, r.t, root)
	}
	if err != nil {
		return err
	}
	if me == root {
		if err := s.check("root's send", all); err != nil {
			return err
		}
		if recv == nil {
			return r.untouched("unused recv")
		}
	}
	return r.check("recv", vals(root, me, n))
}

func typedAllgather(ctx context.Context, c *C.Coll, nb bool, wait waitFn, n, ks, kr int, inPlace bool) error {
	p, me := c.Size(), c.Rank()
	s, r, err := ownAndWhole(p, me, n, ks, kr)
	if err != nil {
		return err
	}
	send := s.bytes()
	if inPlace {
		r.setOwn(p, me, n)
		send = nil
	}
	if nb {
		err = wait(C.IallgatherTyped(c, send, n, s.t, r.bytes(), n, r.t))
	} else {
		err = C.AllgatherTyped(ctx, c, send, n, s.t, r.bytes(), n, r.t)
	}
	if err != nil {
		return err
	}
	return r.check("recv", concat(p, -1, n))
}

func typedAlltoall(ctx context.Context, c *C.Coll, nb bool, wait waitFn, n, ks, kr int, inPlace bool) error {
	p, me := c.Size(), c.Rank()
	s, err := newTLayout(ks, p*n)
	if err != nil {
		return err
	}
	var mine []float64 // block j for rank j
	for j := 0; j < p; j++ {
		mine = append(mine, vals(me, j, n)...)
	}
	s.set(mine)
	r, err := newTLayout(kr, p*n)
	if err != nil {
		return err
	}
	send := s.bytes()
	if inPlace {
		r.set(mine)
		send = nil
	}
	if nb {
		err = wait(C.IalltoallTyped(c, send, n, s.t, r.bytes(), n, r.t))
	} else {
		err = C.AlltoallTyped(ctx, c, send, n, s.t, r.bytes(), n, r.t)
	}
	if err != nil {
		return err
	}
	return r.check("recv", concat(p, me, n))
}

// sums is the element-wise sum over the ranks of their block-0 values.
func sums(p, n int) []float64 {
	want := make([]float64, n*unit)
	for r := 0; r < p; r++ {
		for i, x := range vals(r, 0, n) {
			want[i] += x
		}
	}
	return want
}

func typedReduce(ctx context.Context, c *C.Coll, nb bool, wait waitFn, n, kind int, inPlace bool, root int) error {
	p, me := c.Size(), c.Rank()
	s, err := newTLayout(kind, n)
	if err != nil {
		return err
	}
	s.set(vals(me, 0, n))
	r, err := newTLayout(kind, n) // one datatype, as MPI's reductions take
	if err != nil {
		return err
	}
	send := s.v
	if inPlace && me == root {
		r.set(vals(me, 0, n))
		send = nil
	}
	if nb {
		err = wait(C.IreduceTyped(c, send, r.v, n, s.t, C.Sum[float64](), root))
	} else {
		err = C.ReduceTyped(ctx, c, send, r.v, n, s.t, C.Sum[float64](), root)
	}
	if err != nil {
		return err
	}
	if err := s.check("send", vals(me, 0, n)); err != nil {
		return err
	}
	if me != root {
		return r.untouched("non-root recv")
	}
	return r.check("recv", sums(p, n))
}

func typedAllreduce(ctx context.Context, c *C.Coll, nb bool, wait waitFn, n, kind int, inPlace bool) error {
	p, me := c.Size(), c.Rank()
	s, err := newTLayout(kind, n)
	if err != nil {
		return err
	}
	s.set(vals(me, 0, n))
	r, err := newTLayout(kind, n)
	if err != nil {
		return err
	}
	send := s.v
	if inPlace {
		r.set(vals(me, 0, n))
		send = nil
	}
	if nb {
		err = wait(C.IallreduceTyped(c, send, r.v, n, r.t, C.Sum[float64]()))
	} else {
		err = C.AllreduceTyped(ctx, c, send, r.v, n, r.t, C.Sum[float64]())
	}
	if err != nil {
		return err
	}
	return r.check("recv", sums(p, n))
}

// typedAlgs are the options of the typed runs: the default selection,
// and every collective's other algorithm forced.
var typedAlgs = [][]C.Option{nil, {
	C.WithAlgorithm(C.CollGather, C.Linear), C.WithAlgorithm(C.CollScatter, C.Linear),
	C.WithAlgorithm(C.CollAllgather, C.Ring), C.WithAlgorithm(C.CollAlltoall, C.Pairwise),
	C.WithAlgorithm(C.CollReduce, C.ReduceScatterGather), C.WithAlgorithm(C.CollAllreduce, C.Rabenseifner),
}}

// TestTypedHandles: every typed form over the endpoint handles of one
// process, p = 1 to 5, with the default and the forced algorithms and
// through the nonblocking forms (the progress goroutine on for odd p);
// under -short the default algorithms blocking and the forced ones
// nonblocking.
func TestTypedHandles(t *testing.T) {
	for p := 1; p <= 5; p++ {
		for i, opts := range typedAlgs {
			for _, nb := range []bool{false, true} {
				if testing.Short() && nb != (i == 1) {
					continue // -short (the race detector's run): default algorithms blocking, the others nonblocking
				}
				o := opts
				if nb && p%2 == 1 {
					o = append(o[:len(o):len(o)], C.WithProgress(true))
				}
				t.Run(fmt.Sprintf("p%d/algs%d/nb=%v", p, i, nb), func(t *testing.T) {
					runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, p), o, func(ctx context.Context, c *C.Coll) error {
						return typedBattery(ctx, c, nb)
					})
				})
			}
		}
	}
}

// TestTypedErrors: a typed call whose layouts disagree between ranks, lie
// outside their buffer, or have a datatype a reduction cannot take, fails
// with an error wrapping ErrInvalid (ErrOutOfRange for the layout) on the
// ranks that can see it, and never hangs: the others return an abort's
// error, or nothing where they cannot know (a gather's senders).
func TestTypedErrors(t *testing.T) {
	const p = 3
	col, err := newTLayout(kindColumn, 2)
	if err != nil {
		t.Fatal(err)
	}
	i64col := committed(t)(ddt.Vector(unit, 1, 3, ddt.Int64))
	pair := committed(t)(ddt.Struct([]int{1, 1}, []int64{0, 8}, []*ddt.Type{ddt.Float64, ddt.Int64}))
	cases := []struct {
		name string
		call func(ctx context.Context, c *C.Coll) error
		self []int // ranks that see the error themselves (the others may see it, or another's abort, or nothing where MPI would not)
	}{
		{"gather: rank 1 sends 3 elements, the others 2", func(ctx context.Context, c *C.Coll) error {
			l, _ := newTLayout(kindContig, 3)
			n := 2
			if c.Rank() == 1 {
				n = 3
			}
			r, _ := newTLayout(kindIndexed, p*2)
			return C.GatherTyped(ctx, c, l.bytes(), n, l.t, r.bytes(), 2, r.t, 0)
		}, []int{0}},
		{"alltoall: send packs to 12 values a block, recv to 6", func(ctx context.Context, c *C.Coll) error {
			s, _ := newTLayout(kindContig, 2*p)
			r, _ := newTLayout(kindContig, p)
			return C.AlltoallTyped(ctx, c, s.bytes(), 2, s.t, r.bytes(), 1, r.t)
		}, []int{0, 1, 2}},
		{"allgather: rank 2's receive layout is short", func(ctx context.Context, c *C.Coll) error {
			s, _ := newTLayout(kindColumn, 1)
			r, _ := newTLayout(kindIndexed, p)
			rb := r.bytes()
			if c.Rank() == 2 {
				rb = rb[:len(rb)-8]
			}
			return C.AllgatherTyped(ctx, c, s.bytes(), 1, s.t, rb, 1, r.t)
		}, []int{2}},
		{"reduce of float64 over an int64 column", func(ctx context.Context, c *C.Coll) error {
			v, w := make([]float64, unit*3), make([]float64, unit*3)
			return C.ReduceTyped(ctx, c, v, w, 1, i64col, C.Sum[float64](), 1)
		}, []int{0, 1, 2}},
		{"allreduce of float64 over a struct of float64 and int64", func(ctx context.Context, c *C.Coll) error {
			v := make([]float64, 4)
			return C.AllreduceTyped(ctx, c, nil, v, 2, pair, C.Max[float64]())
		}, []int{0, 1, 2}},
		{"allreduce: rank 0 reduces 2 columns, the others 1", func(ctx context.Context, c *C.Coll) error {
			n := 1
			if c.Rank() == 0 {
				n = 2
			}
			return C.AllreduceTyped(ctx, c, nil, make([]float64, len(col.v)), n, col.t, C.Sum[float64]())
		}, []int{0, 1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs, took := each(t, eptest.Ctx(t, 30*time.Second), handles(t, p), nil, tc.call)
			for i, err := range errs {
				own := errors.Is(err, C.ErrInvalid) || errors.Is(err, C.ErrOutOfRange)
				if slices.Contains(tc.self, i) && !own {
					t.Errorf("rank %d: %v, want ErrInvalid or ErrOutOfRange", i, err)
				}
				if err != nil && !own && !errors.Is(err, C.ErrCanceled) && !errors.Is(err, C.ErrTruncated) {
					t.Errorf("rank %d: %v", i, err)
				}
				if took[i] > quick {
					t.Errorf("rank %d took %v", i, took[i])
				}
			}
		})
	}
}

// TestTypedProcs: the typed battery over processes (blocking and
// nonblocking forms): 3 on the node transport, 2 on tcp (under -short,
// the race detector's run: 3 on the node transport, blocking forms).
func TestTypedProcs(t *testing.T) {
	for _, tc := range []struct {
		prov string
		np   int
	}{{"native", 3}, {"tcp;ofi_rxm", 2}} {
		t.Run(fmt.Sprintf("%s/n%d", provName(tc.prov), tc.np), func(t *testing.T) {
			if tc.prov != "native" {
				testenv.Short(t, "the typed collectives over tcp")
			}
			if launchtest.RunOn(t, tc.np, tc.prov, 60*time.Second) {
				return
			}
			_, ctx, c := worldColl(t)
			for _, nb := range []bool{false, true} {
				if nb && launchtest.Short() {
					break // -short: the blocking forms (the nonblocking ones over handles)
				}
				if err := typedBattery(ctx, c, nb); err != nil {
					t.Fatalf("nonblocking=%v: %v", nb, err)
				}
			}
			if err := c.Free(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
