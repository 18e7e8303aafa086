package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// The hierarchy's tests: the collectives that combine the ranks of one
// process through its memory (Barrier, Bcast, Reduce, Allreduce,
// Allgather), over the handles of one process and over processes × 2-3
// handles, checked against the serial reference on every rank, bitwise
// against the flat algorithms in deterministic mode, and their failures.

var hierColls = []C.Collective{C.CollBarrier, C.CollBcast, C.CollReduce, C.CollAllreduce, C.CollAllgather, C.CollGather, C.CollScatter}

// hierBattery checks every hierarchical collective on c against the
// serial reference (counts 0, 1, 37; every root; in place and not;
// commutative, non-commutative and MinLoc reductions).
func hierBattery(ctx context.Context, c *C.Coll) error {
	return hierBatteryOf(ctx, c, false)
}

// hierBatteryOf is hierBattery, or with quick a shorter one: counts 1
// and 37, roots first, middle and last.
func hierBatteryOf(ctx context.Context, c *C.Coll, quick bool) error {
	e := newEnv(ctx, c)
	roots, counts := make([]int, c.Size()), []int{0, 1, 37}
	for i := range roots {
		roots[i] = i
	}
	if quick {
		roots, counts = []int{0, c.Size() / 2, c.Size() - 1}, []int{1, 37}
	}
	for _, k := range hierColls {
		if !c.Hierarchical(k) {
			return e.errf("%v is not hierarchical", k)
		}
	}
	if err := C.Barrier(ctx, c); err != nil {
		return err
	}
	if err := hierMovers(e, "int32", genInt[int32], counts, roots); err != nil {
		return err
	}
	if err := hierMovers(e, "complex128", genComplex, counts, roots); err != nil {
		return err
	}
	// the v-forms: the process level where a process holds several ranks
	for _, n := range counts[len(counts)-1:] {
		if err := vmovers(e, "int32", genInt[int32], n); err != nil {
			return err
		}
	}
	if err := hierReductions(e, "int32", genInt[int32], C.Sum[int32](), counts, roots, false); err != nil {
		return err
	}
	if err := hierReductions(e, "float64", genFloat, C.Max[float64](), counts, roots, false); err != nil {
		return err
	}
	if err := hierReductions(e, "loc", genLoc, C.MinLoc[float64](), counts, roots, false); err != nil {
		return err
	}
	if err := hierReductions(e, "aff", genAff, compose, counts, roots, false); err != nil {
		return err
	}
	return C.Barrier(ctx, c)
}

// hierMovers checks Bcast, Gather and Scatter (each of roots), Alltoall
// and Allgather (in place and not). Alltoall is hierarchical only where
// every rank is in one process; elsewhere this checks its flat path
// beside the others.
func hierMovers[T comparable](e *env, tname string, g gen[T], counts, roots []int) error {
	c, p, r := e.c, e.p, e.r
	for _, n := range counts {
		for _, root := range roots {
			if err := checkBcast(e, g, n, root, e.next("Bcast[%s] n=%d root=%d", tname, n, root)); err != nil {
				return err
			}
			for _, inPlace := range []bool{false, true} {
				if err := checkGatherScatter(e, g, n, root, inPlace, fmt.Sprintf("[%s] n=%d root=%d inplace=%v", tname, n, root, inPlace)); err != nil {
					return err
				}
			}
		}
		for _, inPlace := range []bool{false, true} {
			salt := e.next("Alltoall[%s] n=%d inplace=%v", tname, n, inPlace)
			send, want := make([]T, p*n), make([]T, p*n)
			for j := 0; j < p; j++ {
				for i := 0; i < n; i++ {
					send[j*n+i] = g(r, j*1000+i, salt)
					want[j*n+i] = g(j, r*1000+i, salt)
				}
			}
			recv := make([]T, p*n)
			junk(recv)
			if inPlace {
				copy(recv, send)
				send = nil
			}
			if err := e.call(C.Alltoall(e.ctx, c, send, recv)); err != nil {
				return err
			}
			if err := check(e, recv, want); err != nil {
				return err
			}
		}
		for _, inPlace := range []bool{false, true} {
			salt := e.next("Allgather[%s] n=%d inplace=%v", tname, n, inPlace)
			want := make([]T, p*n)
			for q := 0; q < p; q++ {
				fillGen(want[q*n:(q+1)*n], g, q, salt)
			}
			send := append([]T(nil), want[r*n:(r+1)*n]...)
			recv := make([]T, p*n)
			junk(recv)
			if inPlace {
				copy(recv[r*n:], send)
				send = nil
			}
			if err := e.call(C.Allgather(e.ctx, c, send, recv)); err != nil {
				return err
			}
			if err := check(e, recv, want); err != nil {
				return err
			}
		}
	}
	return nil
}

// hierReductions checks Reduce (every root, in place and not) and
// Allreduce (in place and not) with op; bitwise: the result must be the
// serial rank-order fold bit for bit.
func hierReductions[T comparable](e *env, tname string, g gen[T], op C.Op[T], counts, roots []int, bitwise bool) error {
	cmp := resultCmp[T](e, bitwise)
	for _, n := range counts {
		for _, root := range roots {
			for _, inPlace := range []bool{false, true} {
				salt := e.next("Reduce[%s,%s] n=%d root=%d inplace=%v", tname, op, n, root, inPlace)
				if err := checkReduce(e, g, op, n, root, inPlace, salt, cmp); err != nil {
					return err
				}
			}
		}
		for _, inPlace := range []bool{false, true} {
			salt := e.next("Allreduce[%s,%s] n=%d inplace=%v", tname, op, n, inPlace)
			if err := checkAllreduce(e, g, op, n, inPlace, salt, cmp); err != nil {
				return err
			}
		}
	}
	return nil
}

func sameBits[T any](a, b []T) bool {
	sz := int(unsafe.Sizeof(*new(T)))
	ab := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), len(a)*sz)
	bb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(b)*sz)
	return len(a) == len(b) && string(ab) == string(bb)
}

// hierDet: in deterministic mode the hierarchical Reduce and Allreduce
// of float64 values spread over 40 binary orders of magnitude give the
// serial fold bit for bit, and the same bits as the flat algorithms on a
// handle made with WithHierarchy(HierOff) over the same communicator.
func hierDet(ctx context.Context, c *C.Coll) error {
	e := newEnv(ctx, c)
	roots := []int{0, e.p / 2, e.p - 1}
	if err := hierReductions(e, "float64", genWide, C.Sum[float64](), []int{1, 37, 1000}, roots, true); err != nil {
		return err
	}
	if err := hierReductions(e, "aff", genAff, compose, []int{5}, roots, true); err != nil {
		return err
	}
	flat, err := C.New(ctx, c.Comm(), C.Deterministic(true), C.WithHierarchy(C.HierOff))
	if err != nil {
		return err
	}
	defer flat.Free()
	if flat.Hierarchical(C.CollAllreduce) {
		return e.errf("HierOff handle is hierarchical")
	}
	for _, n := range []int{1, 100, 3000} { // 3000·8 bytes: Rabenseifner's paths when flat
		salt := e.next("Allreduce det hier vs flat n=%d", n)
		x := make([]float64, n)
		fillGen(x, genWide, e.r, salt)
		h, f := make([]float64, n), make([]float64, n)
		if err := e.call(C.Allreduce(ctx, c, x, h, C.Sum[float64]())); err != nil {
			return err
		}
		if err := e.call(C.Allreduce(ctx, flat, x, f, C.Sum[float64]())); err != nil {
			return err
		}
		if !sameBits(h, f) {
			return e.errf("hierarchical and flat results differ (element %d)", same(h, f))
		}
		root := e.p - 1
		if e.r == root {
			h, f = make([]float64, n), make([]float64, n)
		} else {
			h, f = nil, nil
		}
		if err := e.call(C.Reduce(ctx, c, x, h, C.Sum[float64](), root)); err != nil {
			return err
		}
		if err := e.call(C.Reduce(ctx, flat, x, f, C.Sum[float64](), root)); err != nil {
			return err
		}
		if !sameBits(h, f) {
			return e.errf("hierarchical and flat Reduce differ (element %d)", same(h, f))
		}
	}
	return C.Barrier(ctx, c)
}

// TestHierHandles: the handles of one process, communicator sizes 1 to
// 8, all combined in memory (one process: no leader talks to another).
func TestHierHandles(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 7, 8} {
		t.Run(fmt.Sprintf("p%d", n), func(t *testing.T) {
			runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, n), nil, hierBattery)
			runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, n), []C.Option{C.Deterministic(true)}, hierDet)
		})
	}
	t.Run("p1", func(t *testing.T) {
		runHandles(t, eptest.Ctx(t, 30*time.Second), handles(t, 1), nil, func(ctx context.Context, c *C.Coll) error {
			if c.Hierarchical(C.CollAllreduce) {
				return errors.New("a one-rank communicator is hierarchical")
			}
			return nil
		})
	})
}

// TestHierShared: Allgather and Alltoall among the handles of one process
// with parts on both sides of ShareMin, where the leader writes every
// result or each handle writes its own (hierReleaseShared), in place and
// not, interleaved with the other data movers.
func TestHierShared(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("p%d", n), func(t *testing.T) {
			k := C.ShareMin / 4 / (n - 1) // int32 elements per block at the Allgather's threshold
			counts := []int{k/n - 1, k/n + 1, k - 1, k + 1}
			runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, n), nil, func(ctx context.Context, c *C.Coll) error {
				return hierMovers(newEnv(ctx, c), "int32", genInt[int32], counts, []int{0})
			})
		})
	}
}

// TestHierSelection: the mode and the algorithm overrides decide.
func TestHierSelection(t *testing.T) {
	eps := handles(t, 3)
	ctx := eptest.Ctx(t, 30*time.Second)
	cases := []struct {
		opts []C.Option
		want bool
	}{
		{nil, true},
		{[]C.Option{C.WithHierarchy(C.HierOff)}, false},
		{[]C.Option{C.WithAlgorithm(C.CollAllreduce, C.Ring)}, false},
		{[]C.Option{C.WithAlgorithm(C.CollAllreduce, C.Ring), C.WithHierarchy(C.HierOn)}, true},
	}
	for i, tc := range cases {
		runHandles(t, ctx, eps, tc.opts, func(ctx context.Context, c *C.Coll) error {
			if got := c.Hierarchical(C.CollAllreduce); got != tc.want {
				return fmt.Errorf("case %d: Hierarchical(allreduce) = %v, want %v", i, got, tc.want)
			}
			if want := i != 1; c.Hierarchical(C.CollAlltoall) != want { // Auto everywhere but under HierOff
				return fmt.Errorf("case %d: alltoall hierarchical %v", i, !want)
			}
			if want := i != 1; c.Hierarchical(C.CollAllgatherv) != want { // the process level of the v-forms
				return fmt.Errorf("case %d: allgatherv hierarchical %v", i, !want)
			}
			x := []int64{int64(c.Rank())}
			if err := C.Allreduce(ctx, c, nil, x, C.Sum[int64]()); err != nil {
				return err
			}
			if x[0] != 3 {
				return fmt.Errorf("case %d: sum %d, want 3", i, x[0])
			}
			return nil
		})
	}
	if _, err := C.ParseHierarchy("sometimes"); !errors.Is(err, C.ErrInvalid) {
		t.Fatalf("ParseHierarchy(sometimes): %v", err)
	}
	errs := onHandles(ctx, eps[:1], []C.Option{C.WithHierarchy(C.Hierarchy(9))}, func(context.Context, *C.Coll) error { return nil })
	if !errors.Is(errs[0], C.ErrInvalid) {
		t.Fatalf("WithHierarchy(9): %v", errs[0])
	}
}

// TestHierProcs: processes × handles: 2 processes × 2 and × 3 handles
// (communicators of 4 and 6), the communicator Split makes with the
// processes' ranks interleaved, and one where a process keeps a single
// rank; the battery and deterministic mode on each.
func TestHierProcs(t *testing.T) {
	if launchtest.RunOn(t, 2, "native", 90*time.Second) {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 80*time.Second)
	for _, k := range []int{2, 3} {
		eps, err := w.Comm().CreateEndpoints(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
			if c.Size() != 2*k {
				return fmt.Errorf("size %d, want %d", c.Size(), 2*k)
			}
			if err := hierBattery(ctx, c); err != nil {
				return err
			}
			// Interleaved: rank i of handle h of process q gets key h*2+q.
			q, h := c.Rank()/k, c.Rank()%k
			sub, err := c.Comm().Split(ctx, 0, h*2+q)
			if err != nil {
				return err
			}
			defer sub.Free()
			sc, err := C.New(ctx, sub)
			if err != nil {
				return err
			}
			if err := hierBattery(ctx, sc); err != nil {
				return fmt.Errorf("interleaved: %w", err)
			}
			if err := sc.Free(); err != nil {
				return err
			}
			if err := detOn(ctx, sub); err != nil {
				return fmt.Errorf("interleaved: %w", err)
			}
			// Without the second handle of process 0: process 0 has k-1
			// ranks (one when k = 2), process 1 has k.
			color := 0
			if c.Rank() == 1 {
				color = endpoint.Undefined
			}
			odd, err := c.Comm().Split(ctx, color, 0)
			if err != nil || odd == nil {
				return err
			}
			defer odd.Free()
			oc, err := C.New(ctx, odd)
			if err != nil {
				return err
			}
			if err := hierBattery(ctx, oc); err != nil {
				return fmt.Errorf("uneven: %w", err)
			}
			if err := oc.Free(); err != nil {
				return err
			}
			// The same ranks made by CreateGroup, among themselves alone,
			// in reverse order.
			g, err := c.Comm().Group().Excl(1)
			if err != nil {
				return err
			}
			rev := make([]int, g.Size())
			for i := range rev {
				rev[i] = g.Size() - 1 - i
			}
			if g, err = g.Incl(rev...); err != nil {
				return err
			}
			cg, err := c.Comm().CreateGroup(ctx, g, 3)
			if err != nil {
				return err
			}
			defer cg.Free()
			gc, err := C.New(ctx, cg)
			if err != nil {
				return err
			}
			if err := hierBattery(ctx, gc); err != nil {
				return fmt.Errorf("created from a group: %w", err)
			}
			return gc.Free()
		})
		for _, e := range eps {
			e.Free()
		}
	}
}

// TestHierPeerExit: 3 processes × 2 handles; process 2 exits while the
// others wait for it in a hierarchical Allreduce, or in the Waits of an
// Ibarrier and an Iallreduce, which combine through process memory and
// then among the processes' leaders: every other handle, leader or
// member, returns ErrPeerGone or ErrCanceled within seconds.
func TestHierPeerExit(t *testing.T) {
	testenv.Short(t, "a process leaving mid-collective")
	for _, nb := range []bool{false, true} {
		t.Run(fmt.Sprintf("nonblocking=%v", nb), func(t *testing.T) {
			if launchMayDie(t, 3, 2) {
				return
			}
			w := eptest.InitWorld(t)
			ctx := eptest.Ctx(t, 50*time.Second)
			eps, err := w.Comm().CreateEndpoints(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			errs := onHandles(ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
				if !c.Hierarchical(C.CollAllreduce) {
					return errors.New("not hierarchical")
				}
				return peerExitCalls(t, ctx, c, w.Comm().Rank() == 2, nb)
			})
			for i, err := range errs {
				if err != nil && !errors.Is(err, C.ErrInvalid) { // Free after the failure: left-over messages
					t.Errorf("handle %d: %v", i, err)
				}
			}
		})
	}
}

// TestHierFailures: in one process, a member whose context ends while it
// waits, a member calling another collective, and a member calling a
// flat collective end every handle's call with an error at once.
func TestHierFailures(t *testing.T) {
	eps := handles(t, 4)
	t.Run("cancel", func(t *testing.T) { cancelledMember(t, eps) })
	for _, tc := range []struct {
		name string
		odd  func(ctx context.Context, c *C.Coll) error
	}{
		{"bcast", func(ctx context.Context, c *C.Coll) error { return C.Bcast(ctx, c, []int32{1}, 0) }},
		{"count", func(ctx context.Context, c *C.Coll) error {
			return C.Allreduce(ctx, c, nil, []int32{1, 2}, C.Sum[int32]())
		}},
		{"flat", func(ctx context.Context, c *C.Coll) error {
			return C.Scan(ctx, c, []int32{1}, make([]int32, 1), C.Sum[int32]())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := eptest.Ctx(t, 30*time.Second)
			start := time.Now()
			errs := onHandles(ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
				var err error
				if c.Rank() == 2 {
					err = tc.odd(ctx, c)
				} else {
					err = C.Allreduce(ctx, c, nil, []int32{1}, C.Sum[int32]())
				}
				if c.Rank() != 2 && !errors.Is(err, C.ErrInvalid) {
					return fmt.Errorf("rank %d: %v, want ErrInvalid", c.Rank(), err)
				}
				return nil
			})
			for i, err := range errs {
				if err != nil && !errors.Is(err, C.ErrInvalid) { // Free: left-over messages
					t.Errorf("handle %d: %v", i, err)
				}
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

// BenchmarkAllreduce8: an 8-byte Allreduce over the 4 handles of one
// process, hierarchical (through memory) and flat (messages between the
// handles).
func BenchmarkAllreduce8(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, h := range []C.Hierarchy{C.HierAuto, C.HierOff} {
			b.Run(fmt.Sprintf("n%d/hier=%s", n, h), func(b *testing.B) {
				eps := handles(b, n)
				ctx := context.Background()
				errs := onHandles(ctx, eps, []C.Option{C.WithHierarchy(h)}, func(ctx context.Context, c *C.Coll) error {
					x := []float64{1}
					if c.Rank() == 0 {
						b.ResetTimer()
					}
					for i := 0; i < b.N; i++ {
						if err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]()); err != nil {
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

// BenchmarkAllreduce8OSU: OSU's loop over 4 endpoint handles of one
// process (each call timed alone, then an untimed Barrier); the metric
// ns/call is the ranks' mean time per Allreduce, as osu reports it.
func BenchmarkAllreduce8OSU(b *testing.B) {
	osuLocal(b, true, func(ctx context.Context, c *C.Coll, x []float64) error {
		return C.Allreduce(ctx, c, nil, x, C.Sum[float64]())
	})
}

// BenchmarkNonblockingOSU: the same loop for the nonblocking forms
// through process memory, each started and then waited for (OSU's pure
// latency), 8 bytes: what a call costs over its blocking form.
func BenchmarkNonblockingOSU(b *testing.B) {
	wait := func(ctx context.Context, q *C.Request, err error) error {
		if err != nil {
			return err
		}
		return q.Wait(ctx)
	}
	calls := []struct {
		name string
		call func(ctx context.Context, c *C.Coll, x []float64) error
	}{
		{"Ibarrier", func(ctx context.Context, c *C.Coll, x []float64) error {
			q, err := C.Ibarrier(c)
			return wait(ctx, q, err)
		}},
		{"Ibcast", func(ctx context.Context, c *C.Coll, x []float64) error {
			q, err := C.Ibcast(c, x, 0)
			return wait(ctx, q, err)
		}},
		{"Iallreduce", func(ctx context.Context, c *C.Coll, x []float64) error {
			q, err := C.Iallreduce(c, nil, x, C.Sum[float64]())
			return wait(ctx, q, err)
		}},
	}
	for _, k := range calls {
		b.Run(k.name, func(b *testing.B) { osuLocal(b, k.name != "Ibarrier", k.call) })
	}
}

// osuLocal runs OSU's loop of call over 4 handles of this process,
// with a Barrier after each call if barrier is set (OSU's barrier
// tests have none).
func osuLocal(b *testing.B, barrier bool, call func(ctx context.Context, c *C.Coll, x []float64) error) {
	eps := handles(b, 4)
	ctx := context.Background()
	var mu sync.Mutex
	var total time.Duration
	errs := onHandles(ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		x := []float64{1}
		if c.Rank() == 0 {
			b.ResetTimer()
		}
		var t time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if err := call(ctx, c, x); err != nil {
				return err
			}
			t += time.Since(t0)
			if !barrier {
				continue
			}
			if err := C.Barrier(ctx, c); err != nil {
				return err
			}
		}
		mu.Lock()
		total += t
		mu.Unlock()
		return nil
	})
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total.Nanoseconds())/4/float64(b.N), "ns/call")
}

// BenchmarkAllreduce8Floor is the floor of BenchmarkAllreduce8OSU: the
// same loop over 4 goroutines with no library, each Allreduce and Barrier
// one bare round (every goroutine publishes its value and call number in
// its own cache line, the first one waits for all, sums and publishes
// the call number; the others wait for it). With fewer cores than
// goroutines this is what the scheduler's hand-offs cost: "yield" waits
// call runtime.Gosched after 32 polls, as the library's did before its
// groups parked; "park" waits park on a channel after 4 polls, the last
// goroutine to publish wakes the first, and the first's release wakes
// the others, as the library's groups of more handles than GOMAXPROCS do
// (park.go).
func BenchmarkAllreduce8Floor(b *testing.B) {
	for _, park := range []bool{false, true} {
		name := "yield"
		if park {
			name = "park"
		}
		b.Run(name, func(b *testing.B) { allreduceFloor(b, park, false) })
	}
	b.Run("last", func(b *testing.B) { allreduceFloor(b, true, true) })
}

// allreduceFloor: with last, the goroutine that arrives last (an atomic
// count) sums and releases, and the others park until it does.
func allreduceFloor(b *testing.B, park, last bool) {
	const n = 4
	type line struct {
		pub atomic.Uint64
		v   float64
		_   [48]byte
	}
	lines := make([]line, n)
	var rel atomic.Uint64
	var result float64
	var sleepers atomic.Uint64
	wake := make([]chan struct{}, n)
	for i := range wake {
		wake[i] = make(chan struct{}, 1)
	}
	wakeMask := func(m uint64) {
		if sleepers.Load()&m == 0 {
			return
		}
		for v := sleepers.And(^m) & m; v != 0; v &= v - 1 {
			select {
			case wake[bits.TrailingZeros64(v)] <- struct{}{}:
			default:
			}
		}
	}
	wait := func(r int, cond func() bool) {
		for s := 0; !cond(); s++ {
			switch {
			case !park && s >= 32:
				runtime.Gosched()
			case park && s >= 4:
				sleepers.Or(1 << r)
				if cond() {
					sleepers.And(^uint64(1 << r))
					return
				}
				<-wake[r]
			}
		}
	}
	var count atomic.Uint64
	round := func(r int, call uint64) {
		lines[r].v = 1
		lines[r].pub.Store(call)
		if last {
			if count.Add(1) != call*n {
				wait(r, func() bool { return rel.Load() >= call })
				return
			}
			sum := 0.0
			for q := range lines {
				sum += lines[q].v
			}
			result = sum
			rel.Store(call)
			wakeMask(^uint64(1 << r))
			return
		}
		if r != 0 {
			if park {
				last := true
				for q := 1; q < n; q++ {
					last = last && lines[q].pub.Load() == call
				}
				if last {
					wakeMask(1)
				}
			}
			wait(r, func() bool { return rel.Load() >= call })
			return
		}
		sum := 0.0
		for q := range lines {
			wait(0, func() bool { return lines[q].pub.Load() == call })
			sum += lines[q].v
		}
		result = sum
		rel.Store(call)
		wakeMask(^uint64(1))
	}
	var wg sync.WaitGroup
	times := make([]time.Duration, n)
	b.ResetTimer()
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(1); i <= uint64(b.N); i++ {
				t0 := time.Now()
				round(r, 2*i-1)
				times[r] += time.Since(t0)
				round(r, 2*i)
			}
		}()
	}
	wg.Wait()
	if result != n {
		b.Fatalf("sum %v, want %d", result, n)
	}
	var total time.Duration
	for _, t := range times {
		total += t
	}
	b.ReportMetric(float64(total.Nanoseconds())/n/float64(b.N), "ns/call")
}

// TestReduceMemberLeavesEarly: a Reduce's member that is not the root
// copies its small contribution aside and returns without waiting for its
// leader (as an eager send would): here it returns before the leader, the
// root, has even called, and then overwrites its send buffer; the root's
// result still has the old contribution. The member's next call waits for
// the leader to finish the Reduce first. A member whose count differs
// from the leader's returns at once too; the leader finds the mismatch and
// the member's next call fails.
func TestReduceMemberLeavesEarly(t *testing.T) {
	ctx := eptest.Ctx(t, 30*time.Second)
	left := make(chan struct{})
	errs, _ := each(t, ctx, handles(t, 2), nil, func(ctx context.Context, c *C.Coll) error {
		if c.Rank() == 1 {
			x := []int64{3, 4, 5}
			if err := C.Reduce(ctx, c, x, nil, C.Sum[int64](), 0); err != nil {
				return err
			}
			close(left) // returned before rank 0 called
			x[0], x[1], x[2] = -1, -1, -1
			if err := C.Barrier(ctx, c); err != nil {
				return err
			}
			return nil
		}
		<-left
		out := make([]int64, 3)
		if err := C.Reduce(ctx, c, []int64{10, 20, 30}, out, C.Sum[int64](), 0); err != nil {
			return err
		}
		if out[0] != 13 || out[1] != 24 || out[2] != 35 {
			return fmt.Errorf("Reduce: %v, want [13 24 35]", out)
		}
		return C.Barrier(ctx, c)
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("handle %d: %v", i, err)
		}
	}

	// A nonblocking call right after: it waits for the leader too.
	errs, _ = each(t, ctx, handles(t, 2), nil, func(ctx context.Context, c *C.Coll) error {
		x := []int64{int64(c.Rank() + 1)}
		var out []int64
		if c.Rank() == 0 {
			out = make([]int64, 1)
			time.Sleep(20 * time.Millisecond) // the member's Iallreduce waits for this Reduce
		}
		if err := C.Reduce(ctx, c, x, out, C.Sum[int64](), 0); err != nil {
			return err
		}
		q, err := C.Iallreduce(c, nil, x, C.Sum[int64]())
		if err != nil {
			return err
		}
		if err := q.Wait(ctx); err != nil {
			return err
		}
		if x[0] != 3 || c.Rank() == 0 && out[0] != 3 {
			return fmt.Errorf("Reduce %v, then Iallreduce %v; want 3 and 3", out, x)
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("then nonblocking: handle %d: %v", i, err)
		}
	}

	errs, _ = each(t, ctx, handles(t, 2), nil, func(ctx context.Context, c *C.Coll) error {
		if c.Rank() == 1 {
			if err := C.Reduce(ctx, c, make([]int64, 5), nil, C.Sum[int64](), 0); err != nil {
				return fmt.Errorf("the member's own Reduce: %v, want it to return at once", err)
			}
			if err := C.Barrier(ctx, c); !errors.Is(err, C.ErrInvalid) {
				return fmt.Errorf("the member's call after a mismatched Reduce: %v, want ErrInvalid", err)
			}
			return nil
		}
		err := C.Reduce(ctx, c, make([]int64, 6), make([]int64, 6), C.Sum[int64](), 0)
		if !errors.Is(err, C.ErrInvalid) {
			return fmt.Errorf("the leader's Reduce against a member's other count: %v, want ErrInvalid", err)
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("mismatch: handle %d: %v", i, err)
		}
	}
}

// TestHierSymmetric: among 2, 3 and 5 handles of one process (GOMAXPROCS
// raised to fit, as the symmetric steps require), small Barriers,
// Allreduces (deterministic too), Allgathers, Alltoalls and Bcasts take
// the symmetric steps, interleaved with calls that take the leader's
// path (a larger Allreduce, Reduce), flat ones (Scan) and nonblocking
// ones through process memory, every result checked; then a mismatch
// (Allreduce against Allgather) and a member whose context ends fail
// every handle's call at once.
func TestHierSymmetric(t *testing.T) {
	for _, m := range []int{2, 3, 5} {
		if testenv.Race && m == 5 {
			continue // the race detector: 5 goroutine handles on 2 cores take 17 s; 2 and 3 run the same steps
		}
		t.Run(fmt.Sprintf("p%d", m), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(m, runtime.GOMAXPROCS(0))))
			mixedLocal(t, handles(t, m), func(c *C.Coll) error {
				if !C.SymmetricLocal(c) {
					return fmt.Errorf("%d handles with GOMAXPROCS %d: no symmetric steps", c.Size(), runtime.GOMAXPROCS(0))
				}
				return nil
			})
		})
	}
}

// TestHierParked: among 2, 3 and 5 handles of one process with
// GOMAXPROCS 1, more handles than Go runs at once, the waits in process
// memory park their goroutines (park.go): the calls of TestHierSymmetric
// and a large Allgather whose members write their own parts
// (hierReleaseShared, whose waits poll) give the right results, a mismatch and a member whose context ends fail every call
// at once, a parked member whose context ends returns within parkChecks
// TestHierLastRuns: among 4 handles on 2 Ps, a small Allreduce is run
// by the member that arrives last, whichever it is (the leader too),
// with the results right; a count mismatch, a kind mismatch (Bcast
// against Allreduce), a nonblocking call against a blocking one and a
// member whose context ends each end the call on every handle with an
// error, never a hang.
func TestHierLastRuns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	eps := handles(t, 4)
	for late := range 4 {
		ctx := eptest.Ctx(t, 30*time.Second)
		runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
			r := c.Rank()
			if !C.LastRuns(c) {
				return errors.New("4 handles on 2 Ps: a small Allreduce not run by its last member")
			}
			for it := range 20 {
				if r == late {
					time.Sleep(time.Millisecond)
				}
				x := []int64{int64(r + it), 1}
				if err := C.Allreduce(ctx, c, nil, x, C.Sum[int64]()); err != nil {
					return err
				}
				if x[0] != int64(6+4*it) || x[1] != 4 {
					return fmt.Errorf("Allreduce %d, rank %d last: %v", it, late, x)
				}
			}
			return nil
		})
	}
	mismatch(t, nil, func(ctx context.Context, c *C.Coll) error {
		x := make([]float64, 1+c.Rank()/3)
		return C.Allreduce(ctx, c, nil, x, C.Sum[float64]())
	})
	mismatch(t, nil, func(ctx context.Context, c *C.Coll) error {
		x := make([]float64, 2)
		if c.Rank() == 1 {
			if err := C.Bcast(ctx, c, x, 1); err != nil {
				return err
			}
		} else if err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]()); err != nil {
			return err
		}
		return C.Barrier(ctx, c)
	})
	mismatch(t, nil, func(ctx context.Context, c *C.Coll) error {
		x := make([]float64, 2)
		if c.Rank() == 2 {
			q, err := C.Iallreduce(c, nil, x, C.Sum[float64]())
			if err != nil {
				return err
			}
			return q.Wait(ctx)
		}
		return C.Allreduce(ctx, c, nil, x, C.Sum[float64]())
	})
	// Rank 3 never comes; rank 1 gives up: every other waiting rank
	// returns too.
	ctx := eptest.Ctx(t, 30*time.Second)
	errs, took := each(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		switch c.Rank() {
		case 3:
			return errors.New("absent")
		case 1:
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
		}
		return C.Allreduce(ctx, c, nil, []int32{1}, C.Sum[int32]())
	})
	for i, err := range errs[:3] {
		if err == nil || errors.Is(err, context.DeadlineExceeded) && i != 1 {
			t.Errorf("handle %d: %v, want the call given up by rank 1", i, err)
		}
		if took[i] > quick {
			t.Errorf("handle %d took %v", i, took[i])
		}
	}
}

// watchdog ticks, and the watchdog stops once nothing is parked.
func TestHierParked(t *testing.T) {
	for _, m := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("p%d", m), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			eps := handles(t, m)
			mixedLocal(t, eps, func(c *C.Coll) error {
				if !C.Parks(c) {
					return fmt.Errorf("%d handles with GOMAXPROCS %d: waits do not park", c.Size(), runtime.GOMAXPROCS(0))
				}
				return nil
			})
			ctx := eptest.Ctx(t, 30*time.Second)
			runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
				p, r := c.Size(), c.Rank()
				k := C.ShareMin / 4
				send := make([]int32, k)
				for i := range send {
					send[i] = int32(r*k + i)
				}
				recv := make([]int32, p*k)
				for it := 0; it < 20; it++ {
					clear(recv)
					if err := C.Allgather(ctx, c, send, recv); err != nil {
						return fmt.Errorf("Allgather %d: %w", it, err)
					}
					for i, v := range recv {
						if v != int32(i) {
							return fmt.Errorf("Allgather %d: [%d] %d", it, i, v)
						}
					}
				}
				// The calls after a large one poll too: these let the
				// next ones park again.
				for range C.ParkCalm {
					if err := C.Barrier(ctx, c); err != nil {
						return err
					}
				}
				return nil
			})
			t.Run("absent", func(t *testing.T) {
				// The leader never comes: the members park until their
				// contexts end, the watchdog waking them.
				ctx := eptest.Ctx(t, 30*time.Second)
				start := time.Now()
				// One deadline for all members: the first to give up
				// fails the others' call, which must still report it.
				var once sync.Once
				var deadline time.Time
				errs := onHandles(ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
					if c.Rank() == 0 {
						time.Sleep(50 * time.Millisecond)
						if !C.WatchdogRunning() {
							return errors.New("no watchdog while members are parked")
						}
						return nil
					}
					once.Do(func() { deadline = time.Now().Add(100 * time.Millisecond) })
					ctx, cancel := context.WithDeadline(ctx, deadline)
					defer cancel()
					if err := C.Barrier(ctx, c); !errors.Is(err, context.DeadlineExceeded) {
						return fmt.Errorf("Barrier without the leader: %v, want its deadline", err)
					}
					return nil
				})
				for i, err := range errs {
					if err != nil {
						t.Errorf("handle %d: %v", i, err)
					}
				}
				if took := time.Since(start); took > quick {
					t.Errorf("took %v", took)
				}
			})
			deadline := time.Now().Add(5 * time.Second)
			for C.WatchdogRunning() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if C.WatchdogRunning() {
				t.Error("the watchdog still runs with nothing parked")
			}
		})
	}
}

// mixedLocal runs TestHierSymmetric's calls over handles eps of one
// process, check first on every handle.
func mixedLocal(t *testing.T, eps []*endpoint.Comm, check func(c *C.Coll) error) {
	t.Helper()
	{
		{
			ctx := eptest.Ctx(t, 60*time.Second)
			runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
				p, r := c.Size(), c.Rank()
				if err := check(c); err != nil {
					return err
				}
				det, err := C.New(ctx, c.Comm(), C.Deterministic(true))
				if err != nil {
					return err
				}
				defer det.Free()
				for it := 0; it < 300; it++ {
					n := 1 + it%(120/8)
					x := make([]float64, n)
					for i := range x {
						x[i] = float64((r+1)*(i+it)) / 3
					}
					want := make([]float64, n)
					for q := 0; q < p; q++ {
						for i := range want {
							want[i] += float64((q+1)*(i+it)) / 3
						}
					}
					sum := append([]float64(nil), x...)
					h := c
					if it%3 == 0 {
						h = det
					}
					if err := C.Allreduce(ctx, h, nil, sum, C.Sum[float64]()); err != nil {
						return fmt.Errorf("Allreduce %d: %w", it, err)
					}
					for i := range sum {
						if math.Abs(sum[i]-want[i]) > 1e-9*math.Abs(want[i]) {
							return fmt.Errorf("Allreduce %d: [%d] %v, want %v", it, i, sum[i], want[i])
						}
					}
					k := 1 + it%(120/(4*p))
					send := make([]int32, p*k)
					for i := range send {
						send[i] = int32(1000*r + i + it)
					}
					recv := make([]int32, p*k)
					if err := C.Alltoall(ctx, c, send, recv); err != nil {
						return fmt.Errorf("Alltoall %d: %w", it, err)
					}
					for q := 0; q < p; q++ {
						for i := 0; i < k; i++ {
							if w := int32(1000*q + r*k + i + it); recv[q*k+i] != w {
								return fmt.Errorf("Alltoall %d: from %d [%d] %d, want %d", it, q, i, recv[q*k+i], w)
							}
						}
					}
					ag := make([]int32, p*k)
					if err := C.Allgather(ctx, c, send[:k], ag); err != nil {
						return fmt.Errorf("Allgather %d: %w", it, err)
					}
					for q := 0; q < p; q++ {
						for i := 0; i < k; i++ {
							if w := int32(1000*q + i + it); ag[q*k+i] != w {
								return fmt.Errorf("Allgather %d: from %d [%d] %d, want %d", it, q, i, ag[q*k+i], w)
							}
						}
					}
					root := it % p
					bc := make([]int32, k)
					if r == root {
						copy(bc, send)
					}
					if err := C.Bcast(ctx, c, bc, root); err != nil {
						return fmt.Errorf("Bcast %d: %w", it, err)
					}
					for i := range bc {
						if w := int32(1000*root + i + it); bc[i] != w {
							return fmt.Errorf("Bcast %d: [%d] %d, want %d", it, i, bc[i], w)
						}
					}
					switch it % 4 {
					case 0: // the leader's path
						big := make([]int64, 64)
						big[0] = int64(r)
						if err := C.Allreduce(ctx, c, nil, big, C.Sum[int64]()); err != nil || big[0] != int64(p*(p-1)/2) {
							return fmt.Errorf("large Allreduce %d: %v (%d)", it, err, big[0])
						}
					case 1:
						out := make([]int32, 1)
						if err := C.Reduce(ctx, c, []int32{int32(r)}, out, C.Sum[int32](), root); err != nil {
							return fmt.Errorf("Reduce %d: %w", it, err)
						}
						if r == root && out[0] != int32(p*(p-1)/2) {
							return fmt.Errorf("Reduce %d: %d", it, out[0])
						}
					case 2: // flat
						out := make([]int32, 1)
						if err := C.Scan(ctx, c, []int32{1}, out, C.Sum[int32]()); err != nil || out[0] != int32(r+1) {
							return fmt.Errorf("Scan %d: %v (%d)", it, err, out[0])
						}
					case 3: // nonblocking, through process memory
						v := []int32{int32(r)}
						q, err := C.Iallreduce(c, nil, v, C.Max[int32]())
						if err == nil {
							err = q.Wait(ctx)
						}
						if err != nil || v[0] != int32(p-1) {
							return fmt.Errorf("Iallreduce %d: %v (%d)", it, err, v[0])
						}
					}
					if err := C.Barrier(ctx, c); err != nil {
						return fmt.Errorf("Barrier %d: %w", it, err)
					}
				}
				return nil
			})
			t.Run("mismatch", func(t *testing.T) {
				errs := onHandles(ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
					var err error
					if c.Rank() == 1 {
						err = C.Allgather(ctx, c, []int32{1}, make([]int32, c.Size()))
					} else {
						err = C.Allreduce(ctx, c, nil, []int32{1}, C.Sum[int32]())
					}
					if !errors.Is(err, C.ErrInvalid) && !errors.Is(err, C.ErrCanceled) {
						return fmt.Errorf("rank %d: %v, want ErrInvalid", c.Rank(), err)
					}
					return nil
				})
				for i, err := range errs {
					if err != nil {
						t.Errorf("handle %d: %v", i, err)
					}
				}
			})
			t.Run("cancel", func(t *testing.T) { cancelledMember(t, eps) })
		}
	}
}

// cancelledMember: among handles eps of one process, the leader comes
// late to an Allreduce whose member 1 gives up after 50 ms: every handle's
// call fails at once (member 1 with its context's error, the others with
// ErrCanceled), and the next call finds the handle closed.
func cancelledMember(t *testing.T, eps []*endpoint.Comm) {
	ctx := eptest.Ctx(t, 30*time.Second)
	start := time.Now()
	errs := onHandles(ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		switch c.Rank() {
		case 0: // the leader comes late
			time.Sleep(300 * time.Millisecond)
		case 1:
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
		}
		err := C.Allreduce(ctx, c, nil, []int32{1}, C.Sum[int32]())
		if err == nil {
			return errors.New("Allreduce succeeded")
		}
		want := C.ErrCanceled
		if c.Rank() == 1 {
			want = context.DeadlineExceeded
		}
		if !errors.Is(err, want) {
			return fmt.Errorf("rank %d: %v, want %v", c.Rank(), err, want)
		}
		if err := C.Barrier(ctx, c); !errors.Is(err, C.ErrClosed) {
			return fmt.Errorf("rank %d: Barrier after a failure: %v, want ErrClosed", c.Rank(), err)
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("handle %d: %v", i, err)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
}
