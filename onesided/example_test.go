package onesided_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/job"
	"github.com/weft-hpc/weft/onesided"
)

// A window over the launcher's group: each rank puts a greeting into its
// right neighbour's window with a signal, and waits for its own. Started
// without a launcher the job is a singleton that greets itself.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	g := onesided.JobGroup(j)

	w, err := onesided.Allocate(ctx, g, 64)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Free(ctx)
	const sig, data = 0, 8
	right := (g.Rank() + 1) % g.Size()
	msg := []byte(fmt.Sprintf("hello from %d", g.Rank()))
	if err := w.PutSignal(right, data, msg, sig, 1); err != nil {
		log.Fatal(err)
	}
	if _, err := w.WaitSignal(ctx, sig, onesided.CmpEQ, 1); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (direct store: %v)\n", w.Bytes()[data:data+len(msg)], w.Direct(right))
	// Output: hello from 0 (direct store: true)
}

// The tile pipeline: each iteration produces 8 bytes for every rank; tiles
// of 3 iterations travel while later tiles are computed.
func ExamplePipeline() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	g := onesided.JobGroup(j)
	tr := onesided.NewWindowTransport(g)
	defer tr.Close(ctx)
	p, err := onesided.NewPipeline(ctx, tr, onesided.PipelineConfig{N: 10, K: 3, D: 2, BytesPerIter: 8})
	if err != nil {
		log.Fatal(err)
	}
	compute := func(t onesided.Tile, out [][]byte) error {
		for _, o := range out {
			for i := range o {
				o[i] = byte(t.First + i/8)
			}
		}
		return nil
	}
	consume := func(t onesided.Tile, in [][]byte) error {
		fmt.Printf("tile %d: iterations %d..%d, %d bytes from rank 0\n", t.Index, t.First, t.First+t.Count-1, len(in[0]))
		return nil
	}
	if err := p.Run(ctx, compute, consume); err != nil {
		log.Fatal(err)
	}
	// Output:
	// tile 0: iterations 0..2, 24 bytes from rank 0
	// tile 1: iterations 3..5, 24 bytes from rank 0
	// tile 2: iterations 6..8, 24 bytes from rank 0
	// tile 3: iterations 9..9, 8 bytes from rank 0
}

// A symmetric heap: Alloc returns the same offset on every rank, so an
// object is named by (rank, Sym).
func ExampleHeap() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	h, err := onesided.NewHeap(ctx, onesided.JobGroup(j), 1<<20)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	counter, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := h.Atomic(0, counter, 0, onesided.AtomicUint64, onesided.OpSum, 2); err != nil {
			log.Fatal(err)
		}
	}
	if err := h.Barrier(ctx); err != nil {
		log.Fatal(err)
	}
	old, err := h.Atomic(0, counter, 0, onesided.AtomicUint64, onesided.OpNoOp, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("offset", counter.Off, "counter", old)
	// Output: offset 0 counter 10
}

// Non-fetching atomics on the heap (shmem_atomic_add, _inc, _or and a
// vector add): every rank updates rank 0's histogram without waiting for
// each update, and a Barrier completes them all.
func ExampleHeap_AtomicAddN() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	h, err := onesided.NewHeap(ctx, onesided.JobGroup(j), 1<<16)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	hist, err := h.Alloc(ctx, 4*8, 8) // four int64 bins
	if err != nil {
		log.Fatal(err)
	}
	flags, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		log.Fatal(err)
	}
	me := uint64(j.Rank())
	// Bin i gets i+1 from every rank, bin 0 one more; flags gets bit me.
	if err := h.AtomicAddN(0, hist, 0, onesided.AtomicInt64, []uint64{1, 2, 3, 4}); err != nil {
		log.Fatal(err)
	}
	if err := h.AtomicInc(0, hist, 0, onesided.AtomicInt64); err != nil {
		log.Fatal(err)
	}
	if err := h.AtomicOr(0, flags, 0, onesided.AtomicUint64, 1<<me); err != nil {
		log.Fatal(err)
	}
	// Quiet would complete this rank's updates; Barrier also waits for
	// every other rank's.
	if err := h.Barrier(ctx); err != nil {
		log.Fatal(err)
	}
	if j.Rank() == 0 {
		bins, err := onesided.LocalView[int64](h, hist)
		if err != nil {
			log.Fatal(err)
		}
		f, err := onesided.LocalView[uint64](h, flags)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("bins %v, flags %b\n", bins, f[0])
	}
	// Output: bins [2 2 3 4], flags 1
}

// A window over an endpoint communicator: a program that already has a
// World needs nothing else. Each rank puts its rank into its right
// neighbour's window with a signal and reads its left neighbour's.
func ExampleAllocate() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	world, err := endpoint.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer world.Close()
	comm := world.Comm()

	w, err := onesided.Allocate(ctx, comm, 16)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Free(ctx)
	const sig, data = 0, 8
	right := (comm.Rank() + 1) % comm.Size()
	if err := w.PutSignal(right, data, []byte{byte(comm.Rank())}, sig, 1); err != nil {
		log.Fatal(err)
	}
	if _, err := w.WaitSignal(ctx, sig, onesided.CmpEQ, 1); err != nil {
		log.Fatal(err)
	}
	left := (comm.Rank() + comm.Size() - 1) % comm.Size()
	fmt.Println(w.Bytes()[data] == byte(left))
	// Output: true
}

// A window read and written as []float64, with no unsafe in the caller.
func ExampleView() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	w, err := onesided.Allocate(ctx, onesided.JobGroup(j), 32)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Free(ctx)
	v, err := onesided.View[float64](w)
	if err != nil {
		log.Fatal(err)
	}
	v[0] = 1.5
	fmt.Println(len(v), v[0])
	// Output: 4 1.5
}

// A node-level shared array: each rank writes its part of its right
// neighbour's window with plain stores (MPI_Win_shared_query), where the
// neighbour runs on this node; a Fence makes the stores visible.
func ExampleSharedView() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	g := onesided.JobGroup(j)
	w, err := onesided.Allocate(ctx, g, 8*g.Size())
	if err != nil {
		log.Fatal(err)
	}
	defer w.Free(ctx)
	right := (g.Rank() + 1) % g.Size()
	if v, err := onesided.SharedView[float64](w, right); err == nil {
		v[g.Rank()] = 0.5 * float64(g.Rank()+1)
	} else if errors.Is(err, onesided.ErrNotSupported) { // another node: a Put
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(0.5*float64(g.Rank()+1)))
		if err := w.Put(right, 8*g.Rank(), b[:]); err != nil {
			log.Fatal(err)
		}
	} else {
		log.Fatal(err)
	}
	if err := w.Fence(ctx); err != nil {
		log.Fatal(err)
	}
	left := (g.Rank() + g.Size() - 1) % g.Size()
	mine, err := onesided.View[float64](w)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(mine[left])
	// Output: 0.5
}

// shmem_iput: four values of a local array, every other one, go to every
// third float64 of a heap object (target stride 3, source stride 2), as
// ddt.Vector layouts on both sides.
func ExampleHeap_PutTyped() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	h, err := onesided.NewHeap(ctx, onesided.JobGroup(j), 1<<16)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	obj, err := h.Alloc(ctx, 8*12, 8)
	if err != nil {
		log.Fatal(err)
	}
	src, err := ddt.Vector(4, 1, 2, ddt.Float64)
	if err == nil {
		err = src.Commit()
	}
	dst, err2 := ddt.Vector(4, 1, 3, ddt.Float64)
	if err2 == nil {
		err2 = dst.Commit()
	}
	if err != nil || err2 != nil {
		log.Fatal(err, err2)
	}
	local := []float64{1, -1, 2, -1, 3, -1, 4}
	var b [7 * 8]byte
	for i, x := range local {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	if err := h.PutTyped(0, obj, 0, b[:], 1, src, 1, dst); err != nil {
		log.Fatal(err)
	}
	if err := h.Quiet(ctx); err != nil {
		log.Fatal(err)
	}
	v, err := onesided.LocalView[float64](h, obj)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v)
	// Output: [1 0 0 2 0 0 3 0 0 4 0 0]
}

// ExampleHeap_SetLock guards a read-modify-write of a counter on rank 0
// with a distributed lock (shmem_set_lock): run as a single rank here,
// under fabrun every rank adds its share and the total is exact.
func ExampleHeap_SetLock() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	h, err := onesided.NewHeap(ctx, onesided.JobGroup(j), 1<<12)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	lock, err := h.Alloc(ctx, 8, 8) // zero on every rank
	if err != nil {
		log.Fatal(err)
	}
	counter, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		log.Fatal(err)
	}
	var b [8]byte
	for range 3 {
		if err := h.SetLock(ctx, lock); err != nil {
			log.Fatal(err)
		}
		if err := h.Get(0, counter, 0, b[:]); err != nil {
			log.Fatal(err)
		}
		if err := h.Quiet(ctx); err != nil {
			log.Fatal(err)
		}
		binary.LittleEndian.PutUint64(b[:], binary.LittleEndian.Uint64(b[:])+1)
		if err := h.Put(0, counter, 0, b[:]); err != nil {
			log.Fatal(err)
		}
		if err := h.ClearLock(ctx, lock); err != nil { // completes the Put first
			log.Fatal(err)
		}
	}
	if err := h.Barrier(ctx); err != nil {
		log.Fatal(err)
	}
	if j.Rank() == 0 {
		fmt.Println(binary.LittleEndian.Uint64(h.Local(counter)))
	}
	// Output: 3
}

// A residual summed over the job's ranks with the heap's collectives: each
// rank's share in a symmetric object, the sum in another on every rank
// (OpenSHMEM's shmem_double_sum_reduce). Outside a launcher the job has
// one rank.
func ExampleHeap_Reduce() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	h, err := onesided.NewHeap(ctx, onesided.JobGroup(j), 1<<12)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	part, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		log.Fatal(err)
	}
	sum, err := h.Alloc(ctx, 8, 8)
	if err != nil {
		log.Fatal(err)
	}
	binary.LittleEndian.PutUint64(h.Local(part), math.Float64bits(0.25*float64(j.Rank()+1)))
	if err := h.Reduce(ctx, sum, part, 1, onesided.AtomicFloat64, onesided.OpSum); err != nil {
		log.Fatal(err)
	}
	fmt.Println(math.Float64frombits(binary.LittleEndian.Uint64(h.Local(sum))))
	// Output: 0.25
}

// A halo exchange synchronised among neighbours only (MPI_Win_post,
// _start, _complete, _wait): each rank opens its window to its neighbours,
// waits until they have opened theirs, puts an edge value into each one's
// halo slot, then completes and waits for theirs. Outside a launcher the
// job has one rank, its own neighbour on both sides.
func ExampleWindow_Post() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	g := onesided.JobGroup(j)
	w, err := onesided.Allocate(ctx, g, 16) // 0: from the left, 8: from the right
	if err != nil {
		log.Fatal(err)
	}
	defer w.Free(ctx)
	me, n := g.Rank(), g.Size()
	left, right := (me+n-1)%n, (me+1)%n
	neighbours := []int{left}
	if right != left {
		neighbours = append(neighbours, right)
	}
	if err := w.Post(ctx, neighbours); err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx, neighbours); err != nil {
		log.Fatal(err)
	}
	var lo, hi [8]byte
	binary.LittleEndian.PutUint64(lo[:], uint64(10*me+1)) // my left edge, to the left's right halo
	binary.LittleEndian.PutUint64(hi[:], uint64(10*me+2)) // my right edge, to the right's left halo
	if err := w.Put(left, 8, lo[:]); err != nil {
		log.Fatal(err)
	}
	if err := w.Put(right, 0, hi[:]); err != nil {
		log.Fatal(err)
	}
	if err := w.Complete(ctx); err != nil { // my puts are in place
		log.Fatal(err)
	}
	if err := w.Wait(ctx); err != nil { // my neighbours' puts are in place
		log.Fatal(err)
	}
	fmt.Println(binary.LittleEndian.Uint64(w.Bytes()), binary.LittleEndian.Uint64(w.Bytes()[8:]))
	// Output: 2 1
}

// A team of the even ranks sums a value among its members only
// (shmem_team_split_strided, then a team reduction); the odd ranks are
// not members. Outside a launcher the job has one rank, a team of one.
func ExampleHeap_SplitStrided() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	h, err := onesided.NewHeap(ctx, onesided.JobGroup(j), 1<<12)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	x, err := h.Alloc(ctx, 8, 8) // every rank allocates, members or not
	if err != nil {
		log.Fatal(err)
	}
	evens, err := h.SplitStrided(ctx, 0, 2, (j.Size()+1)/2)
	if err != nil {
		log.Fatal(err)
	}
	if evens.Rank() >= 0 {
		binary.LittleEndian.PutUint64(h.Local(x), uint64(j.Rank()))
		if err := evens.Reduce(ctx, x, x, 1, onesided.AtomicUint64, onesided.OpSum); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("team rank %d of %d: sum of even ranks %d\n", evens.Rank(), evens.Size(), binary.LittleEndian.Uint64(h.Local(x)))
	}
	if err := evens.Destroy(ctx); err != nil { // collective over the heap
		log.Fatal(err)
	}
	// Output: team rank 0 of 1: sum of even ranks 0
}

// Reads overlapped with work: an Rget of the right neighbour's region
// is started, other work runs, and only that read is waited for (outside
// a launcher the job has one rank, its own neighbour).
func ExampleWindow_Rget() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	g := onesided.JobGroup(j)
	w, err := onesided.Allocate(ctx, g, 8)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Free(ctx)
	binary.LittleEndian.PutUint64(w.Bytes(), uint64(100+g.Rank()))
	if err := w.Fence(ctx); err != nil {
		log.Fatal(err)
	}
	right := (g.Rank() + 1) % g.Size()
	var v [8]byte
	r, err := w.Rget(right, 0, v[:])
	if err != nil {
		log.Fatal(err)
	}
	// ... work that does not need v ...
	if err := r.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(binary.LittleEndian.Uint64(v[:]) == uint64(100+right))
	if err := w.Fence(ctx); err != nil { // nobody changes a region another still reads
		log.Fatal(err)
	}
	// Output: true
}

// A dynamic window: each rank attaches a buffer of its own when it likes
// and hands its Region to the others, here by an Allgather; the right
// neighbour's Region is then written like any window, and with a
// flag-polled put (PutSignalRegion). Outside a launcher the job has one
// rank, its own neighbour.
func ExampleCreateDynamic() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	g := onesided.JobGroup(j)
	w, err := onesided.CreateDynamic(ctx, g)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Free(ctx)
	buf := make([]byte, 64)
	r, err := w.Attach(buf)
	if err != nil {
		log.Fatal(err)
	}
	wire, _ := r.MarshalBinary()
	all, err := g.Allgather(ctx, wire)
	if err != nil {
		log.Fatal(err)
	}
	var right onesided.Region
	if err := right.UnmarshalBinary(all[(g.Rank()+1)%g.Size()]); err != nil {
		log.Fatal(err)
	}
	if err := w.PutRegion(right, 8, []byte(fmt.Sprintf("from %d", g.Rank()))); err != nil {
		log.Fatal(err)
	}
	if err := w.Fence(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", buf[8:14])
	// A flag-polled put: the data at 16, then 1 in the signal word at
	// 0; the neighbour waits for the signal, after which the data is
	// there.
	if err := w.PutSignalRegion(right, 16, []byte(fmt.Sprintf("signalled by %d", g.Rank())), right, 0, 1); err != nil {
		log.Fatal(err)
	}
	if _, err := w.WaitSignalRegion(ctx, r, 0, onesided.CmpEQ, 1); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", buf[16:30])
	// Output:
	// from 0
	// signalled by 0
}

// A dynamic window's memory that the ranks of its node store into
// directly: AttachShared allocates and attaches it; the Region travels
// like any other.
func ExampleWindow_AttachShared() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := job.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Finalize()
	g := onesided.JobGroup(j)
	w, err := onesided.CreateDynamic(ctx, g)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Free(ctx)
	r, mem, err := w.AttachShared(64)
	if err != nil {
		log.Fatal(err)
	}
	wire, _ := r.MarshalBinary()
	all, err := g.Allgather(ctx, wire)
	if err != nil {
		log.Fatal(err)
	}
	var right onesided.Region
	if err := right.UnmarshalBinary(all[(g.Rank()+1)%g.Size()]); err != nil {
		log.Fatal(err)
	}
	if err := w.PutSignalRegion(right, 8, []byte(fmt.Sprintf("from %d", g.Rank())), right, 0, 1); err != nil {
		log.Fatal(err)
	}
	if _, err := w.WaitSignalRegion(ctx, r, 0, onesided.CmpEQ, 1); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, direct stores: %v\n", mem[8:14], w.DirectRegion(right))
	// Output:
	// from 0, direct stores: true
}
