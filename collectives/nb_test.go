package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// The battery's calls go through these: the blocking form, or (e.nb) the
// nonblocking form, tested once (the schedule advances only when driven)
// and waited for.

func finish(e *env, q *C.Request, err error) error {
	if err != nil {
		return err
	}
	if done, err := q.Test(); done {
		return err
	}
	return q.Wait(e.ctx)
}

func doBcast[T any](e *env, c *C.Coll, buf []T, root int) error {
	if !e.nb {
		return C.Bcast(e.ctx, c, buf, root)
	}
	q, err := C.Ibcast(c, buf, root)
	return finish(e, q, err)
}

func doGather[T any](e *env, c *C.Coll, send, recv []T, root int) error {
	if !e.nb {
		return C.Gather(e.ctx, c, send, recv, root)
	}
	q, err := C.Igather(c, send, recv, root)
	return finish(e, q, err)
}

func doScatter[T any](e *env, c *C.Coll, send, recv []T, root int) error {
	if !e.nb {
		return C.Scatter(e.ctx, c, send, recv, root)
	}
	q, err := C.Iscatter(c, send, recv, root)
	return finish(e, q, err)
}

func doAllgather[T any](e *env, c *C.Coll, send, recv []T) error {
	if !e.nb {
		return C.Allgather(e.ctx, c, send, recv)
	}
	q, err := C.Iallgather(c, send, recv)
	return finish(e, q, err)
}

func doAlltoall[T any](e *env, c *C.Coll, send, recv []T) error {
	if !e.nb {
		return C.Alltoall(e.ctx, c, send, recv)
	}
	q, err := C.Ialltoall(c, send, recv)
	return finish(e, q, err)
}

func doGatherv[T any](e *env, c *C.Coll, send, recv []T, counts, displs []int, root int) error {
	if !e.nb {
		return C.Gatherv(e.ctx, c, send, recv, counts, displs, root)
	}
	q, err := C.Igatherv(c, send, recv, counts, displs, root)
	return finish(e, q, err)
}

func doScatterv[T any](e *env, c *C.Coll, send []T, counts, displs []int, recv []T, root int) error {
	if !e.nb {
		return C.Scatterv(e.ctx, c, send, counts, displs, recv, root)
	}
	q, err := C.Iscatterv(c, send, counts, displs, recv, root)
	return finish(e, q, err)
}

func doAllgatherv[T any](e *env, c *C.Coll, send, recv []T, counts, displs []int) error {
	if !e.nb {
		return C.Allgatherv(e.ctx, c, send, recv, counts, displs)
	}
	q, err := C.Iallgatherv(c, send, recv, counts, displs)
	return finish(e, q, err)
}

func doAlltoallv[T any](e *env, c *C.Coll, send []T, sc, sd []int, recv []T, rc, rd []int) error {
	if !e.nb {
		return C.Alltoallv(e.ctx, c, send, sc, sd, recv, rc, rd)
	}
	q, err := C.Ialltoallv(c, send, sc, sd, recv, rc, rd)
	return finish(e, q, err)
}

func doAlltoallw(e *env, c *C.Coll, send []byte, sc, sd []int, st []*ddt.Type, recv []byte, rc, rd []int, rt []*ddt.Type) error {
	if !e.nb {
		return C.Alltoallw(e.ctx, c, send, sc, sd, st, recv, rc, rd, rt)
	}
	q, err := C.Ialltoallw(c, send, sc, sd, st, recv, rc, rd, rt)
	return finish(e, q, err)
}

func doReduce[T any](e *env, c *C.Coll, send, recv []T, op C.Op[T], root int) error {
	if !e.nb {
		return C.Reduce(e.ctx, c, send, recv, op, root)
	}
	q, err := C.Ireduce(c, send, recv, op, root)
	return finish(e, q, err)
}

func doAllreduce[T any](e *env, c *C.Coll, send, recv []T, op C.Op[T]) error {
	if !e.nb {
		return C.Allreduce(e.ctx, c, send, recv, op)
	}
	q, err := C.Iallreduce(c, send, recv, op)
	return finish(e, q, err)
}

func doReduceScatterBlock[T any](e *env, c *C.Coll, send, recv []T, op C.Op[T]) error {
	if !e.nb {
		return C.ReduceScatterBlock(e.ctx, c, send, recv, op)
	}
	q, err := C.IreduceScatterBlock(c, send, recv, op)
	return finish(e, q, err)
}

func doReduceScatter[T any](e *env, c *C.Coll, send, recv []T, counts []int, op C.Op[T]) error {
	if !e.nb {
		return C.ReduceScatter(e.ctx, c, send, recv, counts, op)
	}
	q, err := C.IreduceScatter(c, send, recv, counts, op)
	return finish(e, q, err)
}

func doScan[T any](e *env, c *C.Coll, excl bool, send, recv []T, op C.Op[T]) error {
	switch {
	case !e.nb && excl:
		return C.Exscan(e.ctx, c, send, recv, op)
	case !e.nb:
		return C.Scan(e.ctx, c, send, recv, op)
	}
	var q *C.Request
	var err error
	if excl {
		q, err = C.Iexscan(c, send, recv, op)
	} else {
		q, err = C.Iscan(c, send, recv, op)
	}
	return finish(e, q, err)
}

func f64bytes(s []float64) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 8*len(s))
}

// wmovers checks Alltoallw on the faces of a 3D block of nz×ny×nx
// doubles: rank r sends rank j the face across axis j%3 at index
// (r+j) mod that dimension (a ddt.Subarray of its block; none when
// (r+j)%3 == 0), which j stores at the even positions of a strided
// region (a ddt.Vector of stride 2); then the in-place form, every block
// a vector.
func wmovers(e *env, nz, ny, nx int) error {
	c, p, r := e.c, e.p, e.r
	dims := [3]int{nz, ny, nx}
	count := func(a, b int) int {
		if (a+b)%3 == 0 {
			return 0
		}
		return 1
	}
	axis := func(j int) int { return j % 3 }
	faceLen := func(a int) int { return nz * ny * nx / dims[a] }
	face := func(src, dst int) (*ddt.Type, error) {
		a := axis(dst)
		sub, start := dims, [3]int{}
		sub[a], start[a] = 1, (src+dst)%dims[a]
		t, err := ddt.Subarray(dims[:], sub[:], start[:], ddt.OrderC, ddt.Float64)
		if err == nil {
			err = t.Commit()
		}
		return t, err
	}
	strided := func(n int) (*ddt.Type, error) {
		t, err := ddt.Vector(n, 1, 2, ddt.Float64)
		if err == nil {
			err = t.Commit()
		}
		return t, err
	}
	salt := e.next("Alltoallw faces %dx%dx%d", nz, ny, nx)
	block := make([]float64, nz*ny*nx)
	fillGen(block, genFloat, r, salt)
	sc, sd, st := make([]int, p), make([]int, p), make([]*ddt.Type, p)
	rc, rd, rt := make([]int, p), make([]int, p), make([]*ddt.Type, p)
	rsize := 0
	for j := 0; j < p; j++ {
		t, err := face(r, j)
		if err != nil {
			return err
		}
		sc[j], st[j] = count(r, j), t
		n := faceLen(axis(r))
		if rt[j], err = strided(n); err != nil {
			return err
		}
		rc[j], rd[j] = count(j, r), rsize*8
		rsize += 2*n + 1
	}
	recv := make([]float64, rsize)
	junk(recv)
	before := append([]float64(nil), recv...)
	if err := e.call(doAlltoallw(e, c, f64bytes(block), sc, sd, st, f64bytes(recv), rc, rd, rt)); err != nil {
		return err
	}
	for i := 0; i < p; i++ {
		// rank i's face for r, in the subarray's (row-major) order
		a, at := axis(r), (i+r)%dims[axis(r)]
		var want []float64
		if count(i, r) == 1 {
			for z := 0; z < nz; z++ {
				for y := 0; y < ny; y++ {
					for x := 0; x < nx; x++ {
						if [3]int{z, y, x}[a] == at {
							want = append(want, genFloat(i, (z*ny+y)*nx+x, salt))
						}
					}
				}
			}
		}
		base, n := rd[i]/8, faceLen(a)
		for k := 0; k < n; k++ {
			w := before[base+2*k]
			if k < len(want) {
				w = want[k]
			}
			if got := recv[base+2*k]; got != w {
				return e.errf("from rank %d, face element %d: got %v, want %v", i, k, got, w)
			}
			if got := recv[base+2*k+1]; got != before[base+2*k+1] {
				return e.errf("from rank %d: gap after element %d written", i, k)
			}
		}
	}

	// In place: block j (a vector of m doubles at stride 2) goes to rank
	// j, and rank j's block for r arrives in its place.
	m := nx
	vt, err := strided(m)
	if err != nil {
		return err
	}
	salt = e.next("Alltoallw in place m=%d", m)
	buf := make([]float64, p*2*m)
	cnt, dsp, typ := make([]int, p), make([]int, p), make([]*ddt.Type, p)
	for j := 0; j < p; j++ {
		cnt[j], dsp[j], typ[j] = 1, j*2*m*8, vt
		for k := 0; k < 2*m; k++ {
			buf[j*2*m+k] = genFloat(r, j*1000+k, salt)
		}
	}
	if err := e.call(doAlltoallw(e, c, nil, nil, nil, nil, f64bytes(buf), cnt, dsp, typ)); err != nil {
		return err
	}
	for i := 0; i < p; i++ {
		for k := 0; k < m; k++ {
			if got, want := buf[i*2*m+2*k], genFloat(i, r*1000+2*k, salt); got != want {
				return e.errf("in place, from rank %d element %d: got %v, want %v", i, k, got, want)
			}
			if got, want := buf[i*2*m+2*k+1], genFloat(r, i*1000+2*k+1, salt); got != want {
				return e.errf("in place, block %d gap %d written", i, k)
			}
		}
	}
	return nil
}

// TestNonblockingHandles: the whole battery through the nonblocking
// forms, communicator sizes 1 to 8 (some of them under -short), with the
// progress goroutine on the odd sizes.
func TestNonblockingHandles(t *testing.T) {
	sizes := []int{1, 2, 3, 4, 5, 7, 8}
	if testing.Short() {
		sizes = []int{1, 3, 4, 5} // -short (the race detector's run)
	}
	for _, n := range sizes {
		t.Run(fmt.Sprintf("p%d", n), func(t *testing.T) {
			opts := []C.Option{C.WithProgress(n%2 == 1)}
			runHandles(t, eptest.Ctx(t, 120*time.Second), handles(t, n), opts, func(ctx context.Context, c *C.Coll) error {
				e := newEnv(ctx, c)
				e.nb = true
				return batteryOn(e, false)
			})
		})
	}
}

// TestNonblockingFlatHandles: the battery through the nonblocking forms
// over handles of one process with the hierarchy off, so that they run
// the flat algorithms as schedules (with it on they go through process
// memory, TestNonblockingHandles).
func TestNonblockingFlatHandles(t *testing.T) {
	runHandles(t, eptest.Ctx(t, 120*time.Second), handles(t, 4), []C.Option{C.WithHierarchy(C.HierOff)}, func(ctx context.Context, c *C.Coll) error {
		q, err := C.Ibarrier(c)
		if err := waitFlat(ctx, "Ibarrier", q, err); err != nil {
			return err
		}
		e := newEnv(ctx, c)
		e.nb = true
		return batteryOn(e, false)
	})
}

// waitFlat waits for q, which its call started with err, after checking
// that it runs as a flat schedule, not through process memory.
func waitFlat(ctx context.Context, name string, q *C.Request, err error) error {
	if err != nil {
		return err
	}
	if C.ThroughMemory(q) {
		return fmt.Errorf("%s with the hierarchy off goes through process memory", name)
	}
	return q.Wait(ctx)
}

// TestNonblockingWorkersReused: the flat schedules of a handle's
// nonblocking calls run on coroutines the handle keeps for its next calls,
// so 300 calls one after the other leave no goroutine per call behind,
// with their results right, and Free ends the idle ones.
func TestNonblockingWorkersReused(t *testing.T) {
	eps := handles(t, 2)
	before := runtime.NumGoroutine()
	var during [2]int
	runHandles(t, eptest.Ctx(t, 60*time.Second), eps, []C.Option{C.WithHierarchy(C.HierOff)}, func(ctx context.Context, c *C.Coll) error {
		for i := range 300 {
			x := []int64{int64(i + c.Rank())}
			q, err := C.Iallreduce(c, nil, x, C.Sum[int64]())
			if err := waitFlat(ctx, "Iallreduce", q, err); err != nil {
				return err
			}
			if x[0] != int64(2*i+1) {
				return fmt.Errorf("call %d: sum %d, want %d", i, x[0], 2*i+1)
			}
		}
		during[c.Rank()] = runtime.NumGoroutine()
		return nil
	})
	for r, n := range during {
		if n > before+40 {
			t.Errorf("rank %d: %d goroutines after 300 calls, %d before", r, n, before)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+1 {
		t.Errorf("%d goroutines after Free, %d before", n, before)
	}
}

// TestNonblockingLastArriver: over handles of one process a nonblocking
// collective is run by the member that starts it last, so the others'
// Wait returns although that member never tests or waits for its
// request until they are done; with the results right (Iallreduce,
// Ibcast from a rank that is not first, Ireduce in place at a root that
// is not rank 0, Igather, Iscatter and Iallgather in place).
func TestNonblockingLastArriver(t *testing.T) {
	const p, last = 4, 2
	eps := handles(t, p)
	ctx := eptest.Ctx(t, 60*time.Second)
	var started, waited sync.WaitGroup
	started.Add(p - 1)
	waited.Add(p - 1)
	errs, _ := each(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		r := c.Rank()
		if r == last {
			started.Wait() // every other rank has started all six
		}
		sum := []int64{int64(r + 1), int64(10 * (r + 1))}
		bc := make([]byte, 100)
		if r == 1 {
			for i := range bc {
				bc[i] = byte(i + 7)
			}
		}
		red := []float64{float64(r), 1}
		var gat []int32
		if r == 3 {
			gat = make([]int32, 2*p)
		}
		var sc []int16
		if r == 0 {
			sc = []int16{0, 1, 10, 11, 20, 21, 30, 31}
		}
		scr := make([]int16, 2)
		ag := make([]uint8, 3*p)
		for i := range 3 {
			ag[3*r+i] = uint8(10*r + i)
		}
		var qs []*C.Request
		add := func(q *C.Request, err error) error {
			qs = append(qs, q)
			return err
		}
		if err := errors.Join(
			add(C.Iallreduce(c, nil, sum, C.Sum[int64]())),
			add(C.Ibcast(c, bc, 1)),
			add(C.Ireduce(c, map[bool][]float64{true: nil, false: red}[r == 3], red, C.Max[float64](), 3)),
			add(C.Igather(c, []int32{int32(r), int32(-r)}, gat, 3)),
			add(C.Iscatter(c, sc, scr, 0)),
			add(C.Iallgather(c, nil, ag)),
		); err != nil {
			return err
		}
		for i, q := range qs {
			if !C.ThroughMemory(q) {
				return fmt.Errorf("request %d does not go through process memory", i)
			}
		}
		if r != last {
			started.Done()
			for _, q := range qs {
				if err := q.Wait(ctx); err != nil {
					return err
				}
			}
			waited.Done()
		} else {
			waited.Wait() // the others completed with no call of this rank's
			for _, q := range qs {
				if done, err := q.Test(); !done || err != nil {
					return fmt.Errorf("the last rank's own request: done %v, %v", done, err)
				}
			}
		}
		if sum[0] != 10 || sum[1] != 100 {
			return fmt.Errorf("Iallreduce: %v, want [10 100]", sum)
		}
		if err := checkRooted(r, p, bc, red, gat, scr); err != nil {
			return err
		}
		for q := range p {
			for i := range 3 {
				if ag[3*q+i] != uint8(10*q+i) {
					return fmt.Errorf("Iallgather in place: %v", ag)
				}
			}
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("handle %d: %v", i, err)
		}
	}
}

// TestNonblockingGivers: over handles of one process, a member whose
// result needs nobody's data (the root of an Ibcast or Iscatter, the
// other ranks of an Ireduce or Igather) completes its request when it
// starts it, of up to GiveMax bytes, while the others have not started
// theirs; a larger one waits; and a root that gives runs at most NbCalls
// calls ahead of the others, with every call's data intact. That holds
// where the handles outnumber the Ps; two handles on two Ps give
// nothing.
func TestNonblockingGivers(t *testing.T) {
	const p = 4
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // more handles than Ps: members give
	eps := handles(t, p)
	ctx := eptest.Ctx(t, 60*time.Second)
	var ahead sync.WaitGroup
	ahead.Add(1)
	gave := make([]sync.WaitGroup, 4) // by call: its givers have started it
	for i, n := range []int{1, p - 1, p - 1, 1} {
		gave[i].Add(n)
	}
	var rootDone atomic.Int32
	const runs = 2*C.NbCalls + 5
	errs, _ := each(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		r := c.Rank()
		if !C.Parks(c) {
			return fmt.Errorf("%d handles with GOMAXPROCS %d: the group fits", p, runtime.GOMAXPROCS(0))
		}
		bc := make([]byte, 100)
		big := make([]byte, C.GiveMax+8)
		if r == 1 {
			for i := range bc {
				bc[i] = byte(i + 7)
			}
			big[C.GiveMax] = 9
		}
		red := []float64{float64(r), 1}
		gat := make([]int32, 2*p)
		sc := []int16{0, 1, 10, 11, 20, 21, 30, 31}
		scr := make([]int16, 2)
		type call struct {
			name  string
			gives bool
			start func() (*C.Request, error)
		}
		calls := []call{
			{"Ibcast", r == 1, func() (*C.Request, error) { return C.Ibcast(c, bc, 1) }},
			{"Ireduce", r != 3, func() (*C.Request, error) {
				if r == 3 {
					return C.Ireduce(c, nil, red, C.Max[float64](), 3) // in place
				}
				return C.Ireduce(c, red, nil, C.Max[float64](), 3)
			}},
			{"Igather", r != 3, func() (*C.Request, error) { return C.Igather(c, []int32{int32(r), int32(-r)}, gat, 3) }},
			{"Iscatter", r == 0, func() (*C.Request, error) { return C.Iscatter(c, sc, scr, 0) }},
			{"Ibcast large", false, func() (*C.Request, error) { return C.Ibcast(c, big, 1) }},
		}
		// Each call in turn: its givers start it and find it done, then
		// the others start it.
		var wait []*C.Request
		for i, k := range calls[:4] {
			if !k.gives {
				gave[i].Wait()
				q, err := k.start()
				if err != nil {
					return fmt.Errorf("%s: %w", k.name, err)
				}
				wait = append(wait, q)
				continue
			}
			q, err := k.start()
			var done bool
			if err == nil {
				done, err = q.Test()
			}
			gave[i].Done()
			if err != nil || !done {
				return fmt.Errorf("%s: a member that gives: done %v, %v at its start", k.name, done, err)
			}
		}
		for _, q := range wait {
			if err := q.Wait(ctx); err != nil {
				return err
			}
		}
		if r == 3 && (red[0] != 3 || red[1] != 1) {
			return fmt.Errorf("Ireduce in place at rank 3: %v, want [3 1]", red)
		}
		// Larger than GiveMax: the root waits for the others.
		if r == 1 {
			release := sync.OnceFunc(ahead.Done)
			defer release()
			q, err := calls[4].start()
			if err != nil {
				return err
			}
			done, _ := q.Test()
			release()
			if done {
				return fmt.Errorf("Ibcast of %d bytes: the root's request done before the others started", len(big))
			}
			if err := q.Wait(ctx); err != nil {
				return err
			}
		} else {
			ahead.Wait()
			q, err := calls[4].start()
			if err == nil {
				err = q.Wait(ctx)
			}
			if err != nil {
				return err
			}
			if big[C.GiveMax] != 9 {
				return fmt.Errorf("Ibcast of %d bytes: byte %d = %d", len(big), C.GiveMax, big[C.GiveMax])
			}
		}
		if err := checkRooted(r, p, bc, red, gat, scr); err != nil {
			return err
		}
		// The root runs ahead by NbCalls calls, no more, until the
		// others start theirs.
		if err := C.Barrier(ctx, c); err != nil {
			return err
		}
		vals := make([][]uint32, runs)
		for i := range vals {
			vals[i] = make([]uint32, 3)
			if r == 0 {
				vals[i][0], vals[i][2] = uint32(i), uint32(i*i)
			}
		}
		if r != 0 {
			deadline := time.Now().Add(10 * time.Second)
			for rootDone.Load() < C.NbCalls && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			if n := rootDone.Load(); n != C.NbCalls {
				return fmt.Errorf("the root completed %d Ibcasts before the others started; want %d", n, C.NbCalls)
			}
		}
		for i := range runs {
			q, err := C.Ibcast(c, vals[i], 0)
			if err == nil {
				err = q.Wait(ctx)
			}
			if err != nil {
				return fmt.Errorf("Ibcast %d of %d: %w", i, runs, err)
			}
			if r == 0 {
				rootDone.Add(1)
			}
		}
		for i, v := range vals {
			if v[0] != uint32(i) || v[1] != 0 || v[2] != uint32(i*i) {
				return fmt.Errorf("Ibcast %d of the run ahead: %v", i, v)
			}
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("handle %d: %v", i, err)
		}
	}
	// Two handles on two Ps: one copy by the last member, no stage.
	runtime.GOMAXPROCS(2)
	var started sync.WaitGroup
	started.Add(1)
	errs, _ = each(t, ctx, handles(t, 2), nil, func(ctx context.Context, c *C.Coll) error {
		x := []int64{int64(c.Rank())}
		if c.Rank() == 1 {
			started.Wait()
		}
		q, err := C.Ibcast(c, x, 0)
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			done, _ := q.Test()
			started.Done()
			if done {
				return fmt.Errorf("2 handles on 2 Ps: the root's Ibcast done before the other started")
			}
		}
		if err := q.Wait(ctx); err != nil {
			return err
		}
		if x[0] != 0 {
			return fmt.Errorf("Ibcast: %d", x[0])
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("2 handles, handle %d: %v", i, err)
		}
	}
}

// checkRooted checks rank r's results of the rooted calls that
// TestNonblockingLastArriver and TestNonblockingGivers start: an Ibcast
// of 100 bytes from rank 1, an Ireduce (Max) in place at rank 3 of
// {rank, 1}, an Igather at rank 3 of {q, -q} from every rank q and an
// Iscatter from rank 0 of {10q, 10q+1} to every rank q.
func checkRooted(r, p int, bc []byte, red []float64, gat []int32, scr []int16) error {
	for i, v := range bc {
		if v != byte(i+7) {
			return fmt.Errorf("Ibcast: byte %d = %d", i, v)
		}
	}
	if r == 3 && (red[0] != 3 || red[1] != 1) {
		return fmt.Errorf("Ireduce in place at rank 3: %v, want [3 1]", red)
	}
	if r == 3 {
		for q := range p {
			if gat[2*q] != int32(q) || gat[2*q+1] != int32(-q) {
				return fmt.Errorf("Igather: %v", gat)
			}
		}
	}
	if scr[0] != int16(10*r) || scr[1] != int16(10*r+1) {
		return fmt.Errorf("Iscatter: %v", scr)
	}
	return nil
}

// TestNonblockingBig: the reductions of 1 MiB vectors (every algorithm,
// in place and not) and the faces of a 1 MiB block through the
// nonblocking forms, 3 ranks with the progress goroutine (the data movers
// at 1 MiB run through TestOutstanding's 256 KiB and the blocking forms).
func TestNonblockingBig(t *testing.T) {
	testenv.Short(t, "1 MiB nonblocking collectives")
	runHandles(t, eptest.Ctx(t, 120*time.Second), handles(t, 3), []C.Option{C.WithProgress(true)}, func(ctx context.Context, c *C.Coll) error {
		e := newEnv(ctx, c)
		e.nb = true
		if err := reductions(e, "float64", genFloat, C.Sum[float64](), []int{1<<17 + 1}, false); err != nil {
			return err
		}
		if err := wmovers(e, 16, 64, 128); err != nil {
			return err
		}
		return C.Barrier(ctx, c)
	})
}

// outstanding starts one of each nonblocking collective (the checks of
// each result against the serial reference), with a blocking Allreduce
// in the middle, and completes them in reverse order of starting.
func outstanding(ctx context.Context, c *C.Coll, n int) error {
	p, r := c.Size(), c.Rank()
	e := newEnv(ctx, c)
	salt := e.next("outstanding n=%d", n)
	var reqs []*C.Request
	var checks []func() error
	add := func(q *C.Request, err error, check func() error) error {
		if err != nil {
			return err
		}
		reqs, checks = append(reqs, q), append(checks, check)
		return nil
	}
	xs := contributions(genInt[int32], p, n, salt)
	sum := foldRanks(C.Sum[int32](), xs, 0, p)

	ar := append([]int32(nil), xs[r]...)
	q, err := C.Iallreduce(c, nil, ar, C.Sum[int32]())
	if err := add(q, err, func() error { return check(e, ar, sum) }); err != nil {
		return err
	}
	q, err = C.Ibarrier(c)
	if err := add(q, err, func() error { return nil }); err != nil {
		return err
	}
	root := p - 1
	bc := make([]int32, n)
	if r == root {
		copy(bc, xs[root])
	}
	q, err = C.Ibcast(c, bc, root)
	if err := add(q, err, func() error { return check(e, bc, xs[root]) }); err != nil {
		return err
	}
	ag := make([]int32, p*n)
	q, err = C.Iallgather(c, xs[r], ag)
	if err := add(q, err, func() error {
		for i := 0; i < p; i++ {
			if err := check(e, ag[i*n:(i+1)*n], xs[i]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	// a blocking collective while the others are in flight
	blk := append([]int32(nil), xs[r]...)
	if err := C.Allreduce(ctx, c, nil, blk, C.Max[int32]()); err != nil {
		return err
	}
	if err := check(e, blk, foldRanks(C.Max[int32](), xs, 0, p)); err != nil {
		return err
	}
	sc := make([]int32, n)
	q, err = C.Iscan(c, xs[r], sc, C.Sum[int32]())
	if err := add(q, err, func() error { return check(e, sc, foldRanks(C.Sum[int32](), xs, 0, r+1)) }); err != nil {
		return err
	}
	a2a := make([]int32, p)
	send := make([]int32, p)
	for j := range send {
		send[j] = int32(r*100 + j)
	}
	q, err = C.Ialltoall(c, send, a2a)
	if err := add(q, err, func() error {
		for i := 0; i < p; i++ {
			if a2a[i] != int32(i*100+r) {
				return e.errf("alltoall from %d: %d", i, a2a[i])
			}
		}
		return nil
	}); err != nil {
		return err
	}
	rs := make([]int32, n)
	full := make([]int32, p*n)
	for i := range full {
		full[i] = int32(i + r)
	}
	q, err = C.IreduceScatterBlock(c, full, rs, C.Sum[int32]())
	if err := add(q, err, func() error {
		for i := range rs {
			if want := int32(p*(r*n+i) + p*(p-1)/2); rs[i] != want {
				return e.errf("reduce-scatter element %d: %d, want %d", i, rs[i], want)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	// The rooted calls whose other ranks may leave at once (nblocal.go).
	var red []int32
	if r == 0 {
		red = make([]int32, n)
	}
	q, err = C.Ireduce(c, xs[r], red, C.Sum[int32](), 0)
	if err := add(q, err, func() error {
		if r != 0 {
			return nil
		}
		return check(e, red, sum)
	}); err != nil {
		return err
	}
	var gat []int32
	if r == root {
		gat = make([]int32, p*n)
	}
	q, err = C.Igather(c, xs[r], gat, root)
	if err := add(q, err, func() error {
		for i := 0; r == root && i < p; i++ {
			if err := check(e, gat[i*n:(i+1)*n], xs[i]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	var all []int32
	if r == 0 {
		all = make([]int32, 0, p*n)
		for i := 0; i < p; i++ {
			all = append(all, xs[i]...)
		}
	}
	part := make([]int32, n)
	q, err = C.Iscatter(c, all, part, 0)
	if err := add(q, err, func() error { return check(e, part, xs[r]) }); err != nil {
		return err
	}
	for i := len(reqs) - 1; i >= 0; i-- {
		if err := reqs[i].Wait(ctx); err != nil {
			return fmt.Errorf("rank %d, request %d: %w", r, i, err)
		}
		if err := checks[i](); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
	}
	return nil
}

// TestOutstanding: several nonblocking collectives in flight on one
// handle, a blocking one among them, waited for in reverse order; sizes
// 1 to 8, counts 0, 1, odd and 64 Ki elements (past the eager limit and
// the large-message thresholds; under -short fewer sizes and 5000), with
// and without the progress goroutine, and with GOMAXPROCS 1 (handles that
// outnumber the Ps: waits park, a Reduce's, Gather's and Scatter's
// members that need nobody's data leave at once).
func TestOutstanding(t *testing.T) {
	sizes, counts := []int{1, 2, 3, 4, 5, 7, 8}, []int{0, 1, 37, 1 << 16}
	if testing.Short() { // the race detector's run
		sizes, counts = []int{1, 2, 3, 5, 8}, []int{0, 1, 37, 5000}
	}
	for _, n := range sizes {
		for _, prog := range []bool{false, true} {
			for _, procs := range []int{runtime.GOMAXPROCS(0), 1} {
				t.Run(fmt.Sprintf("p%d/progress=%v/gomaxprocs=%d", n, prog, procs), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					outstandingOn(t, n, prog, counts)
				})
			}
		}
	}
}

// outstandingOn runs outstanding on n handles of this process for each
// count.
func outstandingOn(t *testing.T, n int, prog bool, counts []int) {
	runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, n), []C.Option{C.WithProgress(prog)}, func(ctx context.Context, c *C.Coll) error {
		for _, cnt := range counts {
			if err := outstanding(ctx, c, cnt); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestProgressGoroutine: with WithProgress a multi-round Iallreduce
// completes while its callers never drive it (Done does not); without,
// it stays in flight until they do.
func TestProgressGoroutine(t *testing.T) {
	for _, prog := range []bool{true, false} {
		t.Run(fmt.Sprintf("progress=%v", prog), func(t *testing.T) {
			runHandles(t, eptest.Ctx(t, 30*time.Second), handles(t, 4), []C.Option{C.WithProgress(prog), C.WithAlgorithm(C.CollAllreduce, C.Ring)}, func(ctx context.Context, c *C.Coll) error {
				x := make([]float64, 1<<15)
				for i := range x {
					x[i] = float64(c.Rank())
				}
				q, err := C.Iallreduce(c, nil, x, C.Sum[float64]())
				if err != nil {
					return err
				}
				deadline := time.Now().Add(10 * time.Second)
				if !prog {
					deadline = time.Now().Add(100 * time.Millisecond)
				}
				for !q.Done() && time.Now().Before(deadline) {
					time.Sleep(100 * time.Microsecond)
				}
				if q.Done() != prog {
					return fmt.Errorf("progress goroutine %v: Done() = %v without driving", prog, q.Done())
				}
				if err := q.Wait(ctx); err != nil {
					return err
				}
				if x[0] != 6 || x[len(x)-1] != 6 {
					return fmt.Errorf("sum %v, want 6", x[0])
				}
				return nil
			})
		})
	}
}

// TestNonblockingFailures: a cancelled context ends a Wait (the others'
// Waits for it end too); a count mismatch fails every rank's Wait, and
// every rank's Test when the ranks only poll; a
// request of a freed handle, nil requests and Free with collectives
// outstanding are errors.
func TestNonblockingFailures(t *testing.T) {
	eps := handles(t, 4)
	ctx := eptest.Ctx(t, 60*time.Second)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs, took := each(t, ctx, eps, nil, func(_ context.Context, c *C.Coll) error {
		if c.Rank() == 0 {
			// starts, never waits: its schedule is driven by nothing
			time.Sleep(100 * time.Millisecond)
			cancel()
			time.Sleep(200 * time.Millisecond)
			return nil
		}
		q, err := C.Iallreduce(c, nil, make([]float64, 3), C.Sum[float64]())
		if err != nil {
			return err
		}
		err = q.Wait(cctx)
		if !errors.Is(err, context.Canceled) && !errors.Is(err, C.ErrCanceled) {
			return fmt.Errorf("Wait without rank 0: %v, want context.Canceled", err)
		}
		if done, err2 := q.Test(); !done || err2 == nil {
			return fmt.Errorf("Test after the failed Wait: %v, %v", done, err2)
		}
		if _, err := C.Ibarrier(c); !errors.Is(err, C.ErrClosed) {
			return fmt.Errorf("Ibarrier after a failed call: %v, want ErrClosed", err)
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("cancel: handle %d: %v", i, err)
		}
		if took[i] > quick {
			t.Errorf("cancel: handle %d took %v", i, took[i])
		}
	}

	mismatch(t, nil, func(ctx context.Context, c *C.Coll) error {
		n := 6
		if c.Rank() == 2 {
			n = 5
		}
		q1, err := C.Ibarrier(c)
		if err != nil {
			return err
		}
		q2, err := C.Iallreduce(c, make([]int32, n), make([]int32, n), C.Sum[int32]())
		if err != nil {
			return err
		}
		err = q2.Wait(ctx)
		if err1 := q1.Wait(ctx); err == nil {
			err = err1
		}
		return err
	})

	// the same found by Test alone (polled, never waited for)
	mismatch(t, nil, func(ctx context.Context, c *C.Coll) error {
		n := 6
		if c.Rank() == 1 {
			n = 7
		}
		q, err := C.Iallreduce(c, make([]int32, n), make([]int32, n), C.Sum[int32]())
		if err != nil {
			return err
		}
		for ctx.Err() == nil {
			if done, err := q.Test(); done {
				return err
			}
			time.Sleep(10 * time.Microsecond)
		}
		return ctx.Err()
	})

	errs, _ = each(t, ctx, handles(t, 2), nil, func(ctx context.Context, c *C.Coll) error {
		var nilReq *C.Request
		if err := nilReq.Wait(ctx); !errors.Is(err, C.ErrInvalid) {
			return fmt.Errorf("Wait of a nil request: %v", err)
		}
		if _, err := C.Iallreduce(c, make([]int32, 2), make([]int32, 3), C.Sum[int32]()); !errors.Is(err, C.ErrInvalid) {
			return fmt.Errorf("Iallreduce of unequal lengths: %v", err)
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("local errors: handle %d: %v", i, err)
		}
	}
	errs, _ = each(t, ctx, handles(t, 2), nil, func(ctx context.Context, c *C.Coll) error {
		q, err := C.Ibarrier(c)
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if err := c.Free(); !errors.Is(err, C.ErrInvalid) && !(err == nil && q.Done()) {
			return fmt.Errorf("Free with a collective outstanding: %v", err)
		}
		if err := q.Wait(ctx); err != nil {
			return err
		}
		return c.Free()
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("free: handle %d: %v", i, err)
		}
	}
}

// TestNonblockingProcs: the outstanding collectives over processes
// (node transport, 2 and 4; tcp, 2), and over 2 processes × 2 endpoint
// handles with the communicators Split and Dup make of them (Split only
// under -short), progress goroutine on; the whole nonblocking battery
// over 2 processes and over the 2 × 2 handles (not under -short).
func TestNonblockingProcs(t *testing.T) {
	for _, tc := range []struct {
		prov    string
		np, eps int
		battery bool
	}{{"native", 2, 1, true}, {"native", 4, 1, false}, {"tcp;ofi_rxm", 2, 1, false}, {"native", 2, 2, true}} {
		t.Run(fmt.Sprintf("%s/n%d/eps%d", provName(tc.prov), tc.np, tc.eps), func(t *testing.T) {
			if launchtest.RunOn(t, tc.np, tc.prov, 120*time.Second) {
				return
			}
			w := eptest.InitWorld(t)
			ctx := eptest.Ctx(t, 100*time.Second)
			opts := []C.Option{C.WithProgress(tc.eps > 1)}
			body := func(ctx context.Context, c *C.Coll, battery bool) error {
				if battery && !testing.Short() {
					e := newEnv(ctx, c)
					e.nb = true
					if err := batteryOn(e, false); err != nil {
						return err
					}
				}
				for _, n := range []int{0, 37, 1 << 16} {
					if err := outstanding(ctx, c, n); err != nil {
						return err
					}
				}
				return C.Barrier(ctx, c)
			}
			if tc.eps == 1 {
				c, err := C.New(ctx, w.Comm(), opts...)
				if err != nil {
					t.Fatal(err)
				}
				if err := body(ctx, c, tc.battery); err != nil {
					t.Fatal(err)
				}
				if err := c.Free(); err != nil {
					t.Fatal(err)
				}
				return
			}
			eps, err := w.Comm().CreateEndpoints(ctx, tc.eps)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, e := range eps {
					e.Free()
				}
			}()
			runHandles(t, ctx, eps, opts, func(ctx context.Context, c *C.Coll) error {
				if err := body(ctx, c, tc.battery); err != nil {
					return err
				}
				variants := []bool{true, false} // Split, Dup
				if testing.Short() {
					variants = variants[:1]
				}
				for _, split := range variants {
					sub, err := c.Comm().Dup(ctx)
					if split {
						sub, err = c.Comm().Split(ctx, c.Rank()%2, 0)
					}
					if err != nil {
						return err
					}
					sc, err := C.New(ctx, sub, opts...)
					if err == nil {
						err = body(ctx, sc, false)
						if ferr := sc.Free(); err == nil {
							err = ferr
						}
					}
					sub.Free()
					if err != nil {
						return fmt.Errorf("split %v: %w", split, err)
					}
				}
				return nil
			})
		})
	}
}

// TestManyOutstanding: more nonblocking collectives started than the 128
// call numbers message tags tell apart, while one rank starts late (a
// call far enough past the oldest completes that one first), waited for
// in reverse; then one left in flight across 150 blocking calls.
func TestManyOutstanding(t *testing.T) {
	runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, 3), nil, func(ctx context.Context, c *C.Coll) error {
		p, r := c.Size(), c.Rank()
		const k = 150
		if r == 1 {
			time.Sleep(100 * time.Millisecond) // the others' calls pile up
		}
		reqs := make([]*C.Request, k)
		vals := make([][]int64, k)
		for i := range reqs {
			var err error
			if i%3 == 0 {
				reqs[i], err = C.Ibarrier(c)
			} else {
				vals[i] = []int64{int64(i * (r + 1))}
				reqs[i], err = C.Iallreduce(c, nil, vals[i], C.Sum[int64]())
			}
			if err != nil {
				return fmt.Errorf("start %d: %w", i, err)
			}
		}
		for i := k - 1; i >= 0; i-- {
			if err := reqs[i].Wait(ctx); err != nil {
				return fmt.Errorf("wait %d: %w", i, err)
			}
			if vals[i] != nil && vals[i][0] != int64(i*p*(p+1)/2) {
				return fmt.Errorf("call %d: sum %d", i, vals[i][0])
			}
		}
		x := []int64{int64(r)}
		q, err := C.Iallreduce(c, nil, x, C.Sum[int64]())
		if err != nil {
			return err
		}
		for i := 0; i < k; i++ {
			if err := C.Barrier(ctx, c); err != nil {
				return fmt.Errorf("barrier %d: %w", i, err)
			}
		}
		if err := q.Wait(ctx); err != nil {
			return err
		}
		if x[0] != int64(p*(p-1)/2) {
			return fmt.Errorf("sum %d", x[0])
		}
		return nil
	})
}

// TestNonblockingNode: between processes of one node holding one rank
// each (2 and 4), the nonblocking forms take the node level, as the
// blocking ones do (every call advances the node group's steps), at
// sizes through its inline steps, slots, exchanges and streams; several
// are in flight at once, with blocking calls between them, completed in
// reverse order while one rank computes before it first drives them.
func TestNonblockingNode(t *testing.T) {
	for _, np := range []int{2, 4} {
		t.Run(fmt.Sprintf("n%d", np), func(t *testing.T) {
			if launchtest.RunOn(t, np, "native", 120*time.Second) {
				return
			}
			w := eptest.InitWorld(t)
			ctx := eptest.Ctx(t, 100*time.Second)
			for _, progress := range []bool{false, true} {
				c, err := C.New(ctx, w.Comm(), C.WithProgress(progress))
				if err != nil {
					t.Fatal(err)
				}
				nonblockingNode(t, ctx, c)
				if err := c.Free(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func nonblockingNode(t *testing.T, ctx context.Context, c *C.Coll) {
	p, r := c.Size(), c.Rank()
	if procs, _, node := C.HierShape(c); procs != p || !node {
		t.Fatalf("hierarchy: %d processes, node level %v; want %d, true", procs, node, p)
	}
	e := newEnv(ctx, c)
	nodeCalls := 0
	for _, n := range []int{1, 300, 4 << 10, 80 << 10, 300 << 10} {
		salt := e.next("node n=%d", n)
		xs := contributions(genInt[int32], p, n, salt)
		type call struct {
			name  string
			start func() (*C.Request, error)
			check func() error
			block func() error
		}
		ar := append([]int32(nil), xs[r]...)
		bc := make([]int32, n)
		if r == p-1 {
			copy(bc, xs[p-1])
		}
		ag := make([]int32, p*n)
		rd := make([]int32, n)
		a2s, a2r := make([]int32, p*n), make([]int32, p*n)
		for j := 0; j < p; j++ {
			copy(a2s[j*n:(j+1)*n], xs[(r+j)%p])
		}
		calls := []call{
			{"Iallreduce", func() (*C.Request, error) { return C.Iallreduce(c, nil, ar, C.Sum[int32]()) },
				func() error { return check(e, ar, foldRanks(C.Sum[int32](), xs, 0, p)) },
				func() error { return C.Allreduce(ctx, c, nil, ar, C.Sum[int32]()) }},
			{"Ibarrier", func() (*C.Request, error) { return C.Ibarrier(c) }, func() error { return nil },
				func() error { return C.Barrier(ctx, c) }},
			{"Ibcast", func() (*C.Request, error) { return C.Ibcast(c, bc, p-1) },
				func() error { return check(e, bc, xs[p-1]) },
				func() error { return C.Bcast(ctx, c, bc, p-1) }},
			{"Iallgather", func() (*C.Request, error) { return C.Iallgather(c, xs[r], ag) },
				func() error {
					for i := 0; i < p; i++ {
						if err := check(e, ag[i*n:(i+1)*n], xs[i]); err != nil {
							return err
						}
					}
					return nil
				},
				func() error { return C.Allgather(ctx, c, xs[r], ag) }},
			{"Ireduce", func() (*C.Request, error) { return C.Ireduce(c, xs[r], rd, C.Max[int32](), 0) },
				func() error {
					if r != 0 {
						return nil
					}
					return check(e, rd, foldRanks(C.Max[int32](), xs, 0, p))
				},
				func() error { return C.Reduce(ctx, c, xs[r], rd, C.Max[int32](), 0) }},
			{"Ialltoall", func() (*C.Request, error) { return C.Ialltoall(c, a2s, a2r) },
				func() error {
					for i := 0; i < p; i++ {
						if err := check(e, a2r[i*n:(i+1)*n], xs[(i+r)%p]); err != nil {
							return e.errf("alltoall block from %d: %v", i, err)
						}
					}
					return nil
				},
				func() error { return C.Alltoall(ctx, c, a2s, a2r) }},
		}
		// One at a time: each call takes node steps where its
		// blocking form does.
		for _, k := range calls {
			before := C.NodeSteps(c)
			if err := k.block(); err != nil {
				t.Fatalf("%s of %d, blocking: %v", k.name[1:], n, err)
			}
			node := C.NodeSteps(c) != before
			before = C.NodeSteps(c)
			copy(ar, xs[r])
			clear(ag)
			clear(rd)
			clear(a2r)
			if r != p-1 {
				clear(bc)
			}
			q, err := k.start()
			if err == nil {
				err = q.Wait(ctx)
			}
			if err == nil {
				err = k.check()
			}
			if err != nil {
				t.Fatalf("%s of %d: %v", k.name, n, err)
			}
			if got := C.NodeSteps(c) != before; got != node {
				t.Fatalf("%s of %d took node steps %v, its blocking form %v", k.name, n, got, node)
			}
			nodeCalls += map[bool]int{true: 1}[node]
		}
		// All in flight, a blocking Allreduce among them, completed
		// in reverse order; the last rank computes first.
		copy(ar, xs[r])
		clear(ag)
		clear(a2r)
		if r != p-1 {
			clear(bc)
		}
		reqs := make([]*C.Request, len(calls))
		for i, k := range calls {
			q, err := k.start()
			if err != nil {
				t.Fatalf("start %s of %d: %v", k.name, n, err)
			}
			reqs[i] = q
			if i == 2 {
				blk := []int64{int64(r)}
				if err := C.Allreduce(ctx, c, nil, blk, C.Sum[int64]()); err != nil || blk[0] != int64(p*(p-1)/2) {
					t.Fatalf("blocking Allreduce among the outstanding calls: %v (sum %d)", err, blk[0])
				}
			}
		}
		if r == p-1 {
			time.Sleep(20 * time.Millisecond)
		}
		for i := len(reqs) - 1; i >= 0; i-- {
			if err := reqs[i].Wait(ctx); err != nil {
				t.Fatalf("wait %s of %d: %v", calls[i].name, n, err)
			}
		}
		for _, k := range calls {
			if err := k.check(); err != nil {
				t.Fatalf("%s of %d in flight together: %v", k.name, n, err)
			}
		}
	}
	t.Logf("%d of the 30 calls took the node level", nodeCalls)
	if nodeCalls < 20 {
		t.Fatalf("%d of the 30 calls took the node level", nodeCalls)
	}
	if err := C.Barrier(ctx, c); err != nil {
		t.Fatal(err)
	}
}
