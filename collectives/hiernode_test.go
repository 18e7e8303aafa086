package collectives_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
	"github.com/weft-hpc/weft/job"
)

// The node level's tests: processes of one node combining through a
// node segment, with several endpoint handles per process or one, and
// two pretended nodes (WEFT_NODE_ID) whose leaders talk over libfabric.

// detOn runs hierDet on a deterministic handle over comm.
func detOn(ctx context.Context, comm *endpoint.Comm) error {
	dc, err := C.New(ctx, comm, C.Deterministic(true))
	if err != nil {
		return err
	}
	if err := hierDet(ctx, dc); err != nil {
		return fmt.Errorf("deterministic: %w", err)
	}
	return dc.Free()
}

// wantShape fails unless c's hierarchy has procs processes and tops
// top-level groups, and this rank's process is in a node group.
func wantShape(c *C.Coll, procs, tops int) error {
	if p, t, node := C.HierShape(c); p != procs || t != tops || !node {
		return fmt.Errorf("rank %d: hierarchy of %d processes, %d top-level groups, node level %v; want %d, %d, true",
			c.Rank(), p, t, node, procs, tops)
	}
	return nil
}

// TestHierNode: 3 processes of one node holding 1, 2 and 3 endpoint
// handles (6 ranks, three levels: handles of a process, processes of the
// node): the battery (the short one under -short) and deterministic mode
// (bitwise against the serial fold and a flat handle); then the short
// battery on the communicator of each process's first handle (one rank
// per process: the node level alone).
func TestHierNode(t *testing.T) {
	if launchtest.RunOn(t, 3, "native", 90*time.Second) {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 80*time.Second)
	eps := endpointsOf(t, ctx, w.Comm(), w.Comm().Rank()+1)
	runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		if c.Size() != 6 {
			return fmt.Errorf("size %d, want 6", c.Size())
		}
		if err := wantShape(c, 3, 1); err != nil {
			return err
		}
		if err := hierBatteryOf(ctx, c, launchtest.Short()); err != nil {
			return err
		}
		if err := detOn(ctx, c.Comm()); err != nil {
			return err
		}
		color := endpoint.Undefined
		if c.Rank() == 0 || c.Rank() == 1 || c.Rank() == 3 { // each process's first handle
			color = 0
		}
		sub, err := c.Comm().Split(ctx, color, 0)
		if err != nil || sub == nil {
			return err
		}
		defer sub.Free()
		sc, err := C.New(ctx, sub)
		if err != nil {
			return err
		}
		if err := wantShape(sc, 3, 1); err != nil {
			return err
		}
		if err := hierBatteryOf(ctx, sc, true); err != nil {
			return fmt.Errorf("one rank per process: %w", err)
		}
		return sc.Free()
	})
}

// TestHierNodes: 4 processes pretending to be 2 nodes (WEFT_NODE_ID),
// 2 endpoint handles each (8 ranks): handles combine in their process,
// the 2 processes of a node through its segment, and the nodes' leaders
// over libfabric (its shm provider, which reaches across the pretended
// nodes; test/cluster's hybrid program covers real nodes on tcp); the
// short battery (its small Alltoalls by Bruck's algorithm, the default
// over several nodes) and deterministic mode.
func TestHierNodes(t *testing.T) {
	testenv.Short(t, "4 processes as 2 pretended nodes")
	if !launchtest.IsWorker() {
		launchtest.Run(t, 4, "shm", 120*time.Second, endpoint.EnvNodeTransport+"=native")
		return
	}
	ctx := eptest.Ctx(t, 100*time.Second)
	j, err := job.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Finalize() })
	t.Setenv("WEFT_NODE_ID", "pretend-node-"+strconv.Itoa(j.Rank()/2))
	w, err := endpoint.Init(ctx, endpoint.WithJob(j))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	eps := endpointsOf(t, ctx, w.Comm(), 2)
	runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		if err := wantShape(c, 4, 2); err != nil {
			return err
		}
		// 8 ranks over two nodes: Bruck's Alltoall for small blocks
		// (one node would take the linear exchange)
		if a := c.Algorithm(C.CollAlltoall, 64); a != C.Bruck {
			return fmt.Errorf("alltoall of 64 B blocks over 2 nodes: %s, want bruck", a)
		}
		if err := hierBatteryOf(ctx, c, true); err != nil {
			return err
		}
		return detOn(ctx, c.Comm())
	})
}

// TestHierNodeDoneExit: 4 processes of one node, one rank each. In a
// Reduce to the node's leader, process 3 gives its part and exits at
// once while process 2 comes a second late: the leader, waiting for
// process 2, must not fail because process 3, whose part it already
// has, is gone; the Reduce completes with every part.
func TestHierNodeDoneExit(t *testing.T) {
	if launchMayDie(t, 4, 3) {
		return
	}
	_, ctx, c := worldColl(t)
	if err := wantShape(c, 4, 1); err != nil {
		t.Fatal(err)
	}
	if err := C.Barrier(ctx, c); err != nil {
		t.Fatal(err)
	}
	me := c.Rank()
	if me == 2 {
		time.Sleep(time.Second) // the leader's liveness checks run meanwhile
	}
	out := make([]int64, 3)
	err := C.Reduce(ctx, c, []int64{int64(me), 1, int64(me * me)}, out, C.Sum[int64](), 0)
	if me == 3 {
		os.Exit(0) // its part is given; the others still reduce
	}
	if err != nil {
		t.Fatalf("rank %d: Reduce with process 3 gone after giving its part: %v", me, err)
	}
	if me == 0 && (out[0] != 6 || out[1] != 4 || out[2] != 14) {
		t.Fatalf("Reduce: %v, want [6 4 14]", out)
	}
}

// TestHierNodeFailures: 3 processes of one node, one rank each (the node
// level alone). A rank whose context ends while the node's leader is
// late fails with its context's error and the others with ErrCanceled;
// then process 2 exits while the others wait for it in an Allreduce, and
// both return ErrPeerGone (or the abort of the one that saw it first)
// within seconds.
func TestHierNodeFailures(t *testing.T) {
	if launchMayDie(t, 3, 2) {
		return
	}
	w, ctx, c := worldColl(t)
	if err := wantShape(c, 3, 1); err != nil {
		t.Fatal(err)
	}
	if err := C.Barrier(ctx, c); err != nil {
		t.Fatal(err)
	}
	cctx := ctx
	switch c.Rank() {
	case 0: // the node's leader comes late
		time.Sleep(300 * time.Millisecond)
	case 1:
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
	}
	start := time.Now()
	err := C.Allreduce(cctx, c, nil, []int32{1}, C.Sum[int32]())
	want := C.ErrCanceled
	if c.Rank() == 1 {
		want = context.DeadlineExceeded
	}
	if !errors.Is(err, want) {
		t.Fatalf("rank %d: Allreduce with rank 1's context ended: %v, want %v", c.Rank(), err, want)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("rank %d: the cancelled Allreduce took %v", c.Rank(), took)
	}
	c.Free()

	if c, err = C.New(ctx, w.Comm()); err != nil {
		t.Fatal(err)
	}
	defer c.Free()
	if err := C.Barrier(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c.Rank() == 2 {
		time.Sleep(50 * time.Millisecond) // the others are waiting
		os.Exit(0)
	}
	start = time.Now()
	err = C.Allreduce(ctx, c, nil, make([]float64, 4), C.Sum[float64]())
	took := time.Since(start)
	t.Logf("rank %d: %v after %v", c.Rank(), err, took)
	if !errors.Is(err, C.ErrPeerGone) && !errors.Is(err, C.ErrCanceled) {
		t.Fatalf("rank %d: Allreduce with process 2 gone: %v, want ErrPeerGone", c.Rank(), err)
	}
	if took > 10*time.Second {
		t.Fatalf("rank %d: Allreduce with process 2 gone took %v", c.Rank(), took)
	}
}

// TestHierNodeBackToBack: 4 processes of one node, one rank each (the
// node level alone), run Bcasts from every root in turn, of 1 to 150
// elements, back to back with no barrier between them, mixed with
// Reduces to every root and Allreduces (the node's leader runs up to a
// step ahead of the others, and its output slots alternate); every
// result is checked on every rank, and the run must not hang. Then the
// node's leader Bcasts where the others Allreduce: every rank fails,
// at the latest in the Barrier that follows.
func TestHierNodeBackToBack(t *testing.T) {
	if launchtest.RunOn(t, 4, "native", 90*time.Second) {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 80*time.Second)
	c, err := C.New(ctx, w.Comm())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free()
	if err := wantShape(c, 4, 1); err != nil {
		t.Fatal(err)
	}
	iters := 1500
	if launchtest.Short() {
		iters = 400
	}
	me := c.Rank()
	for i := range iters {
		root := i % 4
		n := []int{1, 8, 150}[i%3]
		b := make([]int64, n)
		if me == root {
			for j := range b {
				b[j] = int64(i*1000 + j)
			}
		}
		if err := C.Bcast(ctx, c, b, root); err != nil {
			t.Fatalf("rank %d: Bcast %d from %d: %v", me, i, root, err)
		}
		for j, v := range b {
			if v != int64(i*1000+j) {
				t.Fatalf("rank %d: Bcast %d from %d: element %d is %d, want %d", me, i, root, j, v, i*1000+j)
			}
		}
		switch i % 7 {
		case 3:
			r := []int32{int32(me + i)}
			out := make([]int32, 1)
			if err := C.Reduce(ctx, c, r, out, C.Sum[int32](), (i/7)%4); err != nil {
				t.Fatalf("rank %d: Reduce %d: %v", me, i, err)
			}
			if me == (i/7)%4 && out[0] != int32(6+4*i) {
				t.Fatalf("rank %d: Reduce %d: %d, want %d", me, i, out[0], 6+4*i)
			}
		case 5:
			x := []float64{float64(me)}
			if err := C.Allreduce(ctx, c, nil, x, C.Max[float64]()); err != nil {
				t.Fatalf("rank %d: Allreduce %d: %v", me, i, err)
			}
			if x[0] != 3 {
				t.Fatalf("rank %d: Allreduce %d: %v, want 3", me, i, x[0])
			}
		}
	}

	x := make([]int32, 2)
	if me == 0 {
		err = C.Bcast(ctx, c, x, 0)
	} else {
		err = C.Allreduce(ctx, c, nil, x, C.Sum[int32]())
	}
	if err == nil {
		err = C.Barrier(ctx, c)
	}
	if !errors.Is(err, C.ErrInvalid) && !errors.Is(err, C.ErrCanceled) {
		t.Fatalf("rank %d: mismatched Bcast and Allreduce, then Barrier: %v, want ErrInvalid or ErrCanceled", me, err)
	}
}

// TestHierNodeInlineMismatch: 3 processes of one node, one rank each,
// whose small Bcasts and Reduces go through the processes' inline lines
// (the data next to its mark in one cache line): a Bcast from the node's
// leader where the others Reduce to it, then a Bcast from a member where
// the others Reduce to that member, make every rank fail (at the latest
// in the Barrier that follows), none hang; between them the inline steps
// still deliver, Bcast from every root and Reduce to every root.
func TestHierNodeInlineMismatch(t *testing.T) {
	if launchtest.RunOn(t, 3, "native", 60*time.Second) {
		return
	}
	w, ctx, c := worldColl(t)
	if err := wantShape(c, 3, 1); err != nil {
		t.Fatal(err)
	}
	me := c.Rank()
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			err = C.Barrier(ctx, c)
		}
		if !errors.Is(err, C.ErrInvalid) && !errors.Is(err, C.ErrCanceled) {
			t.Fatalf("rank %d: %s, then Barrier: %v, want ErrInvalid or ErrCanceled", me, what, err)
		}
	}
	mixed := func(root int) error {
		x := []int64{int64(me), 7}
		if me == root {
			return C.Bcast(ctx, c, x, root)
		}
		return C.Reduce(ctx, c, x, nil, C.Sum[int64](), root)
	}
	check("Bcast from the leader against Reduces to it", mixed(0))
	c.Free()
	for _, root := range []int{2, 1, 0} {
		var err error
		if c, err = C.New(ctx, w.Comm()); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			b := []int64{0, 0, 0}
			if me == root {
				b = []int64{int64(i), -int64(i), int64(root)}
			}
			if err := C.Bcast(ctx, c, b, root); err != nil {
				t.Fatalf("rank %d: Bcast from %d: %v", me, root, err)
			}
			if b[0] != int64(i) || b[1] != -int64(i) || b[2] != int64(root) {
				t.Fatalf("rank %d: Bcast %d from %d: %v", me, i, root, b)
			}
			out := make([]int64, 1)
			if err := C.Reduce(ctx, c, []int64{int64(me * i)}, out, C.Sum[int64](), root); err != nil {
				t.Fatalf("rank %d: Reduce to %d: %v", me, root, err)
			}
			if me == root && out[0] != int64(3*i) {
				t.Fatalf("rank %d: Reduce %d to %d: %d, want %d", me, i, root, out[0], 3*i)
			}
		}
		if root == 2 {
			check("Bcast from a member against Reduces to it", mixed(2))
		}
		c.Free()
	}
}

// TestHierNodeBarrierTwo: the Barrier of two processes of one node is
// one symmetric step (each waits for the other's arrival alone), and
// the steps through the leader that follow it (small Bcasts and Reduces
// to either root, whose non-leader process skips the wait for the
// symmetric step's end) deliver. A Barrier against a small Allreduce
// (both symmetric) and against a Bcast (through the leader) fail on
// both ranks, at the latest in the Barrier that follows; none hangs.
func TestHierNodeBarrierTwo(t *testing.T) {
	if launchtest.RunOn(t, 2, "native", 60*time.Second) {
		return
	}
	w, ctx, c := worldColl(t)
	if err := wantShape(c, 2, 1); err != nil {
		t.Fatal(err)
	}
	me := c.Rank()
	sym := C.SymmetricSteps(c)
	for i := range 200 {
		if err := C.Barrier(ctx, c); err != nil {
			t.Fatalf("rank %d: Barrier %d: %v", me, i, err)
		}
		sym++
		if got := C.SymmetricSteps(c); got != sym {
			t.Fatalf("rank %d: after Barrier %d: %d symmetric steps, want %d", me, i, got, sym)
		}
		root := i % 2
		switch i % 3 {
		case 0:
			b := []int32{0, 0}
			if me == root {
				b = []int32{int32(i), -int32(i)}
			}
			if err := C.Bcast(ctx, c, b, root); err != nil {
				t.Fatalf("rank %d: Bcast %d: %v", me, i, err)
			}
			if b[0] != int32(i) || b[1] != -int32(i) {
				t.Fatalf("rank %d: Bcast %d from %d: %v", me, i, root, b)
			}
		case 1:
			out := make([]int64, 2)
			if err := C.Reduce(ctx, c, []int64{int64(me + i), 1}, out, C.Sum[int64](), root); err != nil {
				t.Fatalf("rank %d: Reduce %d: %v", me, i, err)
			}
			if me == root && (out[0] != int64(1+2*i) || out[1] != 2) {
				t.Fatalf("rank %d: Reduce %d to %d: %v", me, i, root, out)
			}
		}
	}
	for _, other := range []string{"Allreduce", "Bcast"} {
		var err error
		switch {
		case me == 0:
			err = C.Barrier(ctx, c)
		case other == "Allreduce":
			err = C.Allreduce(ctx, c, nil, []int32{1}, C.Sum[int32]())
		default:
			err = C.Bcast(ctx, c, []int32{1}, 1)
		}
		if err == nil {
			err = C.Barrier(ctx, c)
		}
		if !errors.Is(err, C.ErrInvalid) && !errors.Is(err, C.ErrCanceled) {
			t.Fatalf("rank %d: Barrier against %s, then Barrier: %v, want ErrInvalid or ErrCanceled", me, other, err)
		}
		c.Free()
		if c, err = C.New(ctx, w.Comm()); err != nil {
			t.Fatal(err)
		}
	}
	c.Free()
}

// TestHierNodeStreamThenBarrier: two processes of one rank each; a
// Reduce to the node's leader that streams (one chunk, which the other
// process writes and leaves) and then a Barrier (a symmetric step). The
// leader pauses between its arrival at the stream and its wait for the
// other's, so that the other process reaches the Barrier first: its
// arrival there must not hide its arrival at the stream, and the pair
// must go on, with the right sums, rather than wait until the context
// ends.
func TestHierNodeStreamThenBarrier(t *testing.T) {
	if launchtest.RunOn(t, 2, "native", 60*time.Second) {
		return
	}
	_, _, c := worldColl(t)
	if err := wantShape(c, 2, 1); err != nil {
		t.Fatal(err)
	}
	me := c.Rank()
	n := C.StreamMin(c) / 4
	if stream, _ := C.NodeStreams(c, 4*n); !stream || 4*n > C.StreamSub {
		t.Fatalf("a Reduce of %d int32 does not stream in one chunk", n)
	}
	if me == 0 {
		defer C.SetStreamArrived(func() { time.Sleep(20 * time.Millisecond) })()
	}
	ctx := eptest.Ctx(t, 20*time.Second)
	src, out := make([]int32, n), make([]int32, n)
	for i := range 5 {
		for k := range src {
			src[k] = int32(me*1000 + i + k)
		}
		if err := C.Reduce(ctx, c, src, out, C.Sum[int32](), 0); err != nil {
			t.Fatalf("rank %d: Reduce %d: %v", me, i, err)
		}
		if me == 0 {
			for k := range out {
				if want := int32(1000 + 2*(i+k)); out[k] != want {
					t.Fatalf("Reduce %d: element %d is %d, want %d", i, k, out[k], want)
				}
			}
		}
		if err := C.Barrier(ctx, c); err != nil {
			t.Fatalf("rank %d: Barrier after Reduce %d: %v", me, i, err)
		}
	}
}

// TestHierNodeStream: 4 processes of one node holding 1, 2, 1 and 2
// endpoint handles (6 ranks) with collnodestream=1, so that the node
// level streams every call it can (Bcast; Allgather and Alltoall over
// more than two processes; Reduce over two): Bcast, Reduce, Allreduce,
// Allgather and Alltoall with counts around a sub-slot's worth of elements (16384
// int32s, 4096 complex128s) and across more sub-slots than a slot holds,
// each checked against the serial reference on every rank, first with
// the single copies between processes (where the kernel allows them) and
// then through the node segment; on the 6 ranks, on the communicator of
// each process's first handle (one rank per process), and on halves of
// both (two processes, where Reduce streams).
func TestHierNodeStream(t *testing.T) {
	if launchtest.RunOn(t, 4, "native", 150*time.Second, "WEFT_TUNE=collnodestream=1") {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 140*time.Second)
	me := w.Comm().Rank()
	eps := endpointsOf(t, ctx, w.Comm(), 1+me%2)
	// Every battery takes counts just below and above a sub-slot; big
	// ones (one rank per process) one across more sub-slots than a slot
	// holds, so that writers wait for readers to free them.
	battery := func(ctx context.Context, c *C.Coll, big bool) error {
		e := newEnv(ctx, c)
		roots := []int{0, c.Size() - 1}
		ints, cplx := []int{16385}, []int{4097}
		if big {
			ints, cplx = []int{1, 16383, 9*16384 + 3}, nil
		}
		if err := hierMovers(e, "int32", genInt[int32], ints, roots); err != nil {
			return err
		}
		if err := hierMovers(e, "complex128", genComplex, cplx, roots); err != nil {
			return err
		}
		if err := hierReductions(e, "int32", genInt[int32], C.Sum[int32](), ints, roots, true); err != nil {
			return err
		}
		return hierReductions(e, "float64", genFloat, C.Max[float64](), cplx, roots, false)
	}
	// halves runs the battery on two halves of comm (low: this rank's),
	// two processes each, where Reduce streams.
	halves := func(ctx context.Context, comm *endpoint.Comm, low, big bool) error {
		half, err := comm.Split(ctx, map[bool]int{true: 0, false: 1}[low], 0)
		if err != nil {
			return err
		}
		hc, err := C.New(ctx, half)
		if err == nil {
			if st, _ := C.NodeStreams(hc, 4); !st {
				err = fmt.Errorf("rank %d of %d: two processes do not stream", hc.Rank(), hc.Size())
			} else if err = battery(ctx, hc, big); err != nil {
				err = fmt.Errorf("%d ranks of two processes: %w", hc.Size(), err)
			}
			if ferr := hc.Free(); err == nil {
				err = ferr
			}
		}
		if ferr := half.Free(); err == nil {
			err = ferr
		}
		return err
	}
	for _, single := range cmaModes() {
		restore := C.SetNodeCMA(single)
		runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
			if err := wantShape(c, 4, 1); err != nil {
				return err
			}
			if st, _ := C.NodeStreams(c, 4); !st {
				return fmt.Errorf("rank %d: the node level does not stream 4 bytes under collnodestream=1", c.Rank())
			}
			if err := battery(ctx, c, false); err != nil {
				return fmt.Errorf("single copies %v: %w", single, err)
			}
			if err := halves(ctx, c.Comm(), c.Rank() < 3, false); err != nil { // processes 0 and 1, 2 and 3
				return fmt.Errorf("single copies %v: %w", single, err)
			}
			color := endpoint.Undefined
			if c.Rank() == 0 || c.Rank() == 1 || c.Rank() == 3 || c.Rank() == 4 { // each process's first handle
				color = 0
			}
			sub, err := c.Comm().Split(ctx, color, 0)
			if err != nil || sub == nil {
				return err
			}
			defer sub.Free()
			sc, err := C.New(ctx, sub)
			if err != nil {
				return err
			}
			if err := battery(ctx, sc, true); err != nil {
				return fmt.Errorf("single copies %v, one rank per process: %w", single, err)
			}
			if err := halves(ctx, sub, sub.Rank() < 2, true); err != nil {
				return fmt.Errorf("single copies %v, one rank per process: %w", single, err)
			}
			if err := sc.Free(); err != nil {
				return err
			}
			return nil
		})
		restore()
	}
}

// TestHierNodeSymmetric: 3 processes of one node, one rank each, take
// an Allreduce of up to ExchBytes as one symmetric step (every process
// folds every part itself). Float64 sums whose value depends on the
// order of the fold must be bitwise the serial left fold over the
// ranks on every rank; vectors at ExchBytes go symmetric and one element
// more through the node's leader; the calls alternate with Reduces to
// every root (whose non-root processes do not wait), Bcasts and
// Barriers, back to back, and with Allreduces of every vector size, so
// that every kind of step follows every other. Then rank 1 calls
// Allreduce where the others call Barrier: every rank fails, none hangs.
func TestHierNodeSymmetric(t *testing.T) {
	if launchtest.RunOn(t, 3, "native", 90*time.Second) {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 80*time.Second)
	c, err := C.New(ctx, w.Comm())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free()
	if err := wantShape(c, 3, 1); err != nil {
		t.Fatal(err)
	}
	me, p := c.Rank(), c.Size()
	// part is rank r's element j in call i: 1 and twice 1.1e-16 (scaled
	// by powers of two), so that (a+b)+c = a but a+(b+c) > a: a fold in
	// another order gives another sum.
	part := func(r, i, j int) float64 {
		return []float64{1, 1.1e-16, 1.1e-16}[r%3] * float64(int(1)<<(j%5)) * float64(int(1)<<(i%7))
	}
	iters := 300
	if launchtest.Short() {
		iters = 90
	}
	counts := []int{1, 3, C.ExchBytes / 8, C.ExchBytes/8 + 1}
	sym := uint64(0)
	for i := range iters {
		n := counts[i%len(counts)]
		x := make([]float64, n)
		for j := range x {
			x[j] = part(me, i, j)
		}
		if err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]()); err != nil {
			t.Fatalf("rank %d: Allreduce %d of %d: %v", me, i, n, err)
		}
		for j, v := range x {
			want := part(0, i, j)
			for r := 1; r < p; r++ {
				want += part(r, i, j)
			}
			if math.Float64bits(v) != math.Float64bits(want) {
				t.Fatalf("rank %d: Allreduce %d of %d: element %d is %v, want the left fold %v", me, i, n, j, v, want)
			}
		}
		if n*8 <= C.ExchBytes {
			sym++
		}
		if got := C.SymmetricSteps(c); got != sym {
			t.Fatalf("rank %d: after Allreduce %d of %d: %d symmetric steps, want %d", me, i, n, got, sym)
		}
		switch i % 5 {
		case 0:
			r := []int64{int64(me + i)}
			out := make([]int64, 1)
			root := (i / 5) % p
			if err := C.Reduce(ctx, c, r, out, C.Sum[int64](), root); err != nil {
				t.Fatalf("rank %d: Reduce %d: %v", me, i, err)
			}
			if me == root && out[0] != int64(3+3*i) {
				t.Fatalf("rank %d: Reduce %d: %d, want %d", me, i, out[0], 3+3*i)
			}
		case 1:
			b := []int32{0, 0}
			if me == i%p {
				b = []int32{int32(i), -int32(i)}
			}
			if err := C.Bcast(ctx, c, b, i%p); err != nil {
				t.Fatalf("rank %d: Bcast %d: %v", me, i, err)
			}
			if b[0] != int32(i) || b[1] != -int32(i) {
				t.Fatalf("rank %d: Bcast %d: %v", me, i, b)
			}
		case 2: // a Barrier of three processes goes through the leader
			if err := C.Barrier(ctx, c); err != nil {
				t.Fatalf("rank %d: Barrier %d: %v", me, i, err)
			}
			if got := C.SymmetricSteps(c); got != sym {
				t.Fatalf("rank %d: after Barrier %d: %d symmetric steps, want %d", me, i, got, sym)
			}
		case 3: // an Allgather that fits the exchange areas is one symmetric step
			k := []int{2, C.ExchBytes/8 + 1}[(i/5)%2]
			mine, all := make([]int64, k), make([]int64, k*p)
			for j := range mine {
				mine[j] = int64(me*1000003 + i*31 + j)
			}
			if err := C.Allgather(ctx, c, mine, all); err != nil {
				t.Fatalf("rank %d: Allgather %d of %d: %v", me, i, k, err)
			}
			for r := range p {
				for j := range k {
					if v := all[r*k+j]; v != int64(r*1000003+i*31+j) {
						t.Fatalf("rank %d: Allgather %d of %d: rank %d's element %d is %d", me, i, k, r, j, v)
					}
				}
			}
			if k*8 <= C.ExchBytes {
				sym++
			}
			if got := C.SymmetricSteps(c); got != sym {
				t.Fatalf("rank %d: after Allgather %d of %d: %d symmetric steps, want %d", me, i, k, got, sym)
			}
		case 4: // so is an Alltoall whose blocks, all of a process's, fit
			k := []int{1, 3, C.ExchBytes / 8 / p, C.ExchBytes/8/p + 1}[(i/5)%4]
			send, recv := make([]int64, k*p), make([]int64, k*p)
			for j := range send {
				send[j] = int64(me*1000003 + i*31 + j)
			}
			inPlace := (i/5)%3 == 1
			if inPlace {
				copy(recv, send)
				send = nil
			}
			if err := C.Alltoall(ctx, c, send, recv); err != nil {
				t.Fatalf("rank %d: Alltoall %d of %d: %v", me, i, k, err)
			}
			for r := range p {
				for j := range k {
					if v, want := recv[r*k+j], int64(r*1000003+i*31+me*k+j); v != want {
						t.Fatalf("rank %d: Alltoall %d of %d (in place %v): rank %d's element %d is %d, want %d", me, i, k, inPlace, r, j, v, want)
					}
				}
			}
			if p*k*8 <= C.ExchBytes {
				sym++
			}
			if got := C.SymmetricSteps(c); got != sym {
				t.Fatalf("rank %d: after Alltoall %d of %d: %d symmetric steps, want %d", me, i, k, got, sym)
			}
		}
	}

	x := []int32{1}
	if me == 1 {
		err = C.Allreduce(ctx, c, nil, x, C.Sum[int32]())
	} else {
		err = C.Barrier(ctx, c)
	}
	if err == nil {
		err = C.Barrier(ctx, c)
	}
	if !errors.Is(err, C.ErrInvalid) && !errors.Is(err, C.ErrCanceled) {
		t.Fatalf("rank %d: Allreduce against Barrier, then Barrier: %v, want ErrInvalid or ErrCanceled", me, err)
	}
}

// TestHierNodeStreamAllreduce: 3 processes of one node, one rank each,
// and two of them on a communicator of their own, take an Allreduce at
// or above collnodestream as one node stream in which every process
// folds every contribution (streamAllreduce). Float64 sums whose value
// depends on the order of the fold must be bitwise the serial left fold
// over the ranks on every rank, with a separate send buffer (streamed
// straight from it) and in place, for vectors just above the stream's
// threshold, of one sub-slot, and across more sub-slots than a slot
// holds (writers wait for readers), back to back with Bcasts.
func TestHierNodeStreamAllreduce(t *testing.T) {
	if launchtest.RunOn(t, 3, "native", 90*time.Second) {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 80*time.Second)
	// part is rank r's element j in call i: (1 + -1) + 1.1e-16 is
	// 1.1e-16, (1 + 1.1e-16) + -1 is 0: a fold in another order gives
	// another sum.
	part := func(r, i, j int) float64 {
		return []float64{1, -1, 1.1e-16}[r%3] * float64(int(1)<<(j%5)) * float64(int(1)<<(i%7))
	}
	run := func(comm *endpoint.Comm) error {
		c, err := C.New(ctx, comm)
		if err != nil {
			return err
		}
		defer c.Free()
		me, p := c.Rank(), c.Size()
		for i, n := range []int{C.StreamMin(c)/8 + 1, C.StreamSub / 8, 9*C.StreamSub/8 + 3, 5} {
			if st, _ := C.NodeStreams(c, n*8); st != (n*8 >= C.StreamMin(c)) {
				return fmt.Errorf("rank %d of %d: %d float64s stream %v", me, p, n, st)
			}
			for _, inPlace := range []bool{false, true} {
				x, y := make([]float64, n), make([]float64, n)
				for j := range x {
					x[j] = part(me, i, j)
				}
				send := x
				if inPlace {
					y, send = x, nil
				}
				if err := C.Allreduce(ctx, c, send, y, C.Sum[float64]()); err != nil {
					return fmt.Errorf("rank %d of %d: Allreduce of %d (in place %v): %w", me, p, n, inPlace, err)
				}
				for j, v := range y {
					want := part(0, i, j)
					for r := 1; r < p; r++ {
						want += part(r, i, j)
					}
					if math.Float64bits(v) != math.Float64bits(want) {
						return fmt.Errorf("rank %d of %d: Allreduce of %d (in place %v): element %d is %v, want the left fold %v", me, p, n, inPlace, j, v, want)
					}
				}
				if !inPlace && x[0] != part(me, i, 0) {
					return fmt.Errorf("rank %d of %d: Allreduce of %d changed its send buffer", me, p, n)
				}
				b := []int64{0}
				if me == i%p {
					b[0] = int64(i + 1)
				}
				if err := C.Bcast(ctx, c, b, i%p); err != nil || b[0] != int64(i+1) {
					return fmt.Errorf("rank %d of %d: Bcast after Allreduce of %d: %v, %v", me, p, n, b, err)
				}
			}
		}
		return nil
	}
	if err := run(w.Comm()); err != nil {
		t.Fatal(err)
	}
	me := w.Comm().Rank()
	color := endpoint.Undefined
	if me < 2 {
		color = 0
	}
	sub, err := w.Comm().Split(ctx, color, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sub != nil {
		defer sub.Free()
		if err := run(sub); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Comm().Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHierNodeStreamPeerExit: a process that exits in the middle of a
// streamed Allreduce (3 processes, 32 MiB, many rounds of the sub-slots)
// makes the others' call fail with ErrPeerGone (or ErrCanceled, from a
// rank that learnt it first) within seconds, not hang.
func TestHierNodeStreamPeerExit(t *testing.T) {
	if launchMayDie(t, 3, 2) {
		return
	}
	_, ctx, c := worldColl(t)
	defer c.Free()
	x := make([]float64, 4<<20) // 32 MiB: 512 chunks, far more than rank 2 writes before it exits
	if st, _ := C.NodeStreams(c, len(x)*8); !st {
		t.Fatalf("rank %d: an Allreduce of %d bytes does not stream", c.Rank(), len(x)*8)
	}
	if err := C.Barrier(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c.Rank() == 2 {
		// Killed from outside a few milliseconds in, whatever this
		// process's goroutines are doing (the race detector's build
		// takes the whole stream far longer than that).
		killer := exec.Command("sh", "-c", fmt.Sprintf("sleep 0.005; kill -9 %d", os.Getpid()))
		if err := killer.Start(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]())
	if c.Rank() == 2 {
		t.Fatalf("rank 2: the Allreduce ended (%v) before the kill", err)
	}
	took := time.Since(start)
	t.Logf("rank %d: %v after %v", c.Rank(), err, took)
	if !errors.Is(err, C.ErrPeerGone) && !errors.Is(err, C.ErrCanceled) {
		t.Fatalf("rank %d: streamed Allreduce with process 2 gone: %v, want ErrPeerGone", c.Rank(), err)
	}
	if took > 10*time.Second {
		t.Fatalf("rank %d: streamed Allreduce with process 2 gone took %v", c.Rank(), took)
	}
}

// TestStores: 2 processes of one node holding 1 and 2 handles run
// Bcast, Reduce, Allreduce, Allgather and Alltoall of 8 KiB and more per
// rank, each checked against the serial reference on every rank, with
// WEFT_TUNE's collstores stream, plain and auto (under the race detector
// auto only); under auto, 40 more Allreduces of 64 KiB leave both ways
// timed on every handle.
func TestStores(t *testing.T) {
	modes := []string{"stream", "plain", "auto"}
	if testenv.Race {
		modes = modes[2:] // auto runs and times both ways; the race detector needs them once
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			if launchtest.RunOn(t, 2, "native", 120*time.Second, "WEFT_TUNE=collstores="+mode) {
				return
			}
			w := eptest.InitWorld(t)
			ctx := eptest.Ctx(t, 110*time.Second)
			eps := endpointsOf(t, ctx, w.Comm(), 1+w.Comm().Rank())
			runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
				e := newEnv(ctx, c)
				counts, roots := []int{2049, 16385, 300000}, []int{0, c.Size() - 1}
				if err := hierMovers(e, "int32", genInt[int32], counts, roots); err != nil {
					return err
				}
				if err := hierReductions(e, "int32", genInt[int32], C.Sum[int32](), counts, roots, true); err != nil {
					return err
				}
				if mode != "auto" {
					return nil
				}
				x := make([]float64, 8192)
				for i := 0; i < 40; i++ {
					for j := range x {
						x[j] = float64(j + c.Rank())
					}
					if err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]()); err != nil {
						return err
					}
					if want := float64(3*c.Size() + c.Size()*(c.Size()-1)/2); x[3] != want {
						return fmt.Errorf("Allreduce %d: element 3 is %v, want %v", i, x[3], want)
					}
				}
				if procs, _, _ := C.HierShape(c); procs != 2 {
					return fmt.Errorf("rank %d: %d processes in the hierarchy, want 2", c.Rank(), procs)
				}
				if s, p := C.StoreEstimates(c, 8*len(x)); s <= 0 || p <= 0 {
					return fmt.Errorf("rank %d: Allreduce of %d bytes timed %v streamed, %v plain: want both", c.Rank(), 8*len(x), s, p)
				}
				return nil
			})
		})
	}
}

// TestBcastPair: between two processes of one rank each, a Bcast from
// collnodestream bytes up to one node step's chunk goes as one
// point-to-point message (no node step) where the processes may not
// read each other's memory; where they may, from PairReadMin to
// PairReadMax (the chunk) it is a single-copy node step; below and above
// that through the node's steps. Ibcast and BcastTyped take the same
// route as Bcast, both roots, interleaved with node-level calls, byte
// for byte.
func TestBcastPair(t *testing.T) {
	if launchtest.RunOn(t, 2, "native", 120*time.Second) {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 100*time.Second)
	const chunk = 512 << 10
	// every other byte of 128
	v, err := ddt.Vector(64, 1, 2, ddt.Byte)
	if err != nil {
		t.Fatal(err)
	}
	col, err := ddt.Resized(v, 0, 128)
	if err == nil {
		err = col.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	eachNodeCMA(t, ctx, w, func(_ bool, c *C.Coll) { bcastPairs(t, ctx, c, col, chunk) })
}

// cmaModes is the node level's copy modes the tests run: single copies
// between processes (where the kernel allows them), then the node
// segment. Under the race detector, which sees one process's goroutines,
// the segment alone: its code is most of what theirs run.
func cmaModes() []bool {
	if testenv.Race {
		return []bool{false}
	}
	return []bool{true, false}
}

// eachNodeCMA runs f on a new Coll over w's world made with single copies
// at the node level offered (single true), then refused, and frees it
// (the modes of cmaModes).
func eachNodeCMA(t *testing.T, ctx context.Context, w *endpoint.World, f func(single bool, c *C.Coll)) {
	t.Helper()
	for _, single := range cmaModes() {
		restore := C.SetNodeCMA(single)
		c, err := C.New(ctx, w.Comm())
		restore()
		if err != nil {
			t.Fatal(err)
		}
		f(single, c)
		if err := c.Free(); err != nil {
			t.Fatal(err)
		}
	}
}

// bcastPairs is TestBcastPair on c.
func bcastPairs(t *testing.T, ctx context.Context, c *C.Coll, col *ddt.Type, chunk int) {
	t.Helper()
	me := c.Rank()
	lo := C.StreamMin(c)
	_, cma := C.NodeStreams(c, lo)
	pairs := func(n int) bool {
		return n >= lo && n <= chunk && !(cma && n >= C.PairReadMin && n <= C.PairReadMax)
	}
	cases := []struct {
		n    int
		pair bool
	}{{lo - 8, false}, {lo, pairs(lo)}, {64<<10 + 24, pairs(64<<10 + 24)}, {chunk, pairs(chunk)}, {chunk + 8, false}, {3 << 20, false}}
	for i, k := range cases {
		for _, root := range []int{0, 1} {
			fill := func(b []byte) {
				for j := range b {
					b[j] = byte(j*7 + i + 3*root)
				}
			}
			want := make([]byte, k.n)
			fill(want)
			// Bcast, then Ibcast, each after an Allreduce through the
			// node level.
			for _, form := range []string{"Bcast", "Ibcast"} {
				x := []int64{int64(me + 1)}
				if err := C.Allreduce(ctx, c, nil, x, C.Sum[int64]()); err != nil || x[0] != 3 {
					t.Fatalf("Allreduce before %s of %d: %v %v", form, k.n, x, err)
				}
				b := make([]byte, k.n)
				if me == root {
					fill(b)
				}
				before := C.NodeSteps(c)
				var err error
				if form == "Bcast" {
					err = C.Bcast(ctx, c, b, root)
				} else {
					var q *C.Request
					if q, err = C.Ibcast(c, b, root); err == nil {
						err = q.Wait(ctx)
					}
				}
				if err != nil {
					t.Fatalf("%s of %d from %d: %v", form, k.n, root, err)
				}
				if !bytes.Equal(b, want) {
					t.Fatalf("%s of %d from %d: wrong bytes", form, k.n, root)
				}
				if stepped := C.NodeSteps(c) != before; stepped == k.pair {
					t.Fatalf("%s of %d from %d: node steps %v, want %v", form, k.n, root, stepped, !k.pair)
				}
			}
			// BcastTyped: every other byte of 2·n/64 vectors.
			cnt := k.n / 64
			if cnt == 0 {
				continue
			}
			tb := make([]byte, 128*cnt)
			if me == root {
				fill(tb)
			}
			before := C.NodeSteps(c)
			if err := C.BcastTyped(ctx, c, tb, cnt, col, root); err != nil {
				t.Fatalf("BcastTyped of %d from %d: %v", cnt*64, root, err)
			}
			src := make([]byte, len(tb))
			fill(src)
			for j := range tb {
				w := byte(0)
				if j%2 == 0 || me == root {
					w = src[j]
				}
				if tb[j] != w {
					t.Fatalf("BcastTyped of %d from %d: byte %d is %d, want %d", cnt*64, root, j, tb[j], w)
				}
			}
			if stepped, pair := C.NodeSteps(c) != before, pairs(cnt*64); stepped == pair {
				t.Fatalf("BcastTyped of %d from %d: node steps %v, want %v", cnt*64, root, stepped, !pair)
			}
		}
	}
}

// TestPairReads: two processes of one rank each move a Reduce rooted at
// rank 1 (not the node's leader) of PairReadMin to PairReadMax bytes, a
// Bcast (both roots) and a Reduce rooted at rank 0 of PairReadRootMin to
// PairReadMax bytes, and an Allgather and an Alltoall from PairReadMin
// bytes a rank, as one single-copy step each, straight from the other's
// buffers (Reduce in place and not, a sum of int64 and a max of
// float64), and through the node segment below those sizes or with
// cross-memory attach off; every result checked element for element.
func TestPairReads(t *testing.T) {
	if launchtest.RunOn(t, 2, "native", 120*time.Second) {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 100*time.Second)
	eachNodeCMA(t, ctx, w, func(single bool, c *C.Coll) {
		me := c.Rank()
		_, cma := C.NodeStreams(c, C.StreamMin(c))
		if single && !cma {
			t.Logf("cross-memory attach refused here: only the node segment's path is checked")
		}
		// steps runs f and checks that it took one single-copy step
		// exactly when want (and cross-memory attach is on).
		steps := func(what string, n int, want bool, f func() error) {
			t.Helper()
			before := C.NodeReads(c)
			if err := f(); err != nil {
				t.Fatalf("single copies %v: %s of %d bytes: %v", single, what, n, err)
			}
			if got := C.NodeReads(c) - before; got != 0 != (want && cma) {
				t.Fatalf("single copies %v: %s of %d bytes took %d single-copy steps, want them %v", single, what, n, got, want && cma)
			}
		}
		// Both lower bounds come down to collnodestream where it is lower.
		readMin, rootMin := min(C.PairReadMin, C.StreamMin(c)), min(C.PairReadRootMin, C.StreamMin(c))
		for _, n := range []int{C.PairReadMin - 8, C.PairReadMin, C.PairReadMin + 24, C.PairReadRootMin - 8, C.PairReadRootMin, 64 << 10, C.PairReadMax, C.PairReadMax + 8} {
			reads := n >= readMin
			hop := reads && n <= C.PairReadMax           // a Reduce rooted at rank 1
			rooted := n >= rootMin && n <= C.PairReadMax // a Bcast, a Reduce rooted at rank 0
			for root := 0; root < 2; root++ {
				b := make([]byte, n)
				if me == root {
					for j := range b {
						b[j] = byte(j*13 + root + n)
					}
				}
				steps("Bcast", n, rooted, func() error { return C.Bcast(ctx, c, b, root) })
				for j := range b {
					if b[j] != byte(j*13+root+n) {
						t.Fatalf("Bcast of %d from %d: byte %d is %d", n, root, j, b[j])
					}
				}
				k := n / 8
				x := make([]int64, k)
				for j := range x {
					x[j] = int64(j*(me+1) + root)
				}
				var sum []int64
				if me == root {
					sum = make([]int64, k)
				}
				reduceReads := rooted || root == 1 && hop
				steps("Reduce", n, reduceReads, func() error { return C.Reduce(ctx, c, x, sum, C.Sum[int64](), root) })
				for j := range sum {
					if want := int64(3*j + 2*root); sum[j] != want {
						t.Fatalf("Reduce of %d int64 to %d: element %d is %d, want %d", k, root, j, sum[j], want)
					}
				}
				f := make([]float64, k)
				for j := range f {
					f[j] = float64((j+me)%7) - 3.5
				}
				send := f
				if me == root {
					send = nil // in place
				}
				steps("Reduce in place", n, reduceReads, func() error { return C.Reduce(ctx, c, send, f, C.Max[float64](), root) })
				if me == root {
					for j := range f {
						if want := max(float64(j%7), float64((j+1)%7)) - 3.5; f[j] != want {
							t.Fatalf("Reduce in place of %d float64 to %d: element %d is %v, want %v", k, root, j, f[j], want)
						}
					}
				}
			}
			mine := make([]byte, n)
			for j := range mine {
				mine[j] = byte(j*5 + me*11)
			}
			all := make([]byte, 2*n)
			steps("Allgather", n, reads, func() error { return C.Allgather(ctx, c, mine, all) })
			sendAll := make([]byte, 2*n)
			for j := range sendAll {
				sendAll[j] = byte(j*3 + me*17)
			}
			got := make([]byte, 2*n)
			steps("Alltoall", n, reads, func() error { return C.Alltoall(ctx, c, sendAll, got) })
			for r := 0; r < 2; r++ {
				for j := 0; j < n; j++ {
					if all[r*n+j] != byte(j*5+r*11) {
						t.Fatalf("Allgather of %d: block %d byte %d is %d", n, r, j, all[r*n+j])
					}
					if want := byte((me*n+j)*3 + r*17); got[r*n+j] != want {
						t.Fatalf("Alltoall of %d: block %d byte %d is %d, want %d", n, r, j, got[r*n+j], want)
					}
				}
			}
		}
	})
}
