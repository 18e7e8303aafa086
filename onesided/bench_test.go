package onesided

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// benchPair allocates a direct-store window over two goroutine ranks and
// runs body on each; rank 0's body runs the timed loop.
func benchPair(b *testing.B, size int, body func(ctx context.Context, w *Window, rank int), opts ...Option) {
	benchRanks(b, 2, size, body, opts...)
}

// benchRanks is benchPair with n goroutine ranks.
func benchRanks(b *testing.B, n, size int, body func(ctx context.Context, w *Window, rank int), opts ...Option) {
	ctx := context.Background()
	gs := newMemWorld(n)
	ws := make([]*Window, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i], errs[i] = Allocate(ctx, gs[i], size, append([]Option{WithSharedMemory(ShmOnly)}, opts...)...)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range gs {
		wg.Add(1)
		go func() { defer wg.Done(); body(ctx, ws[i], i) }()
	}
	wg.Wait()
	b.StopTimer()
	for i := range gs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = ws[i].Free(ctx) }()
	}
	wg.Wait()
}

// BenchmarkPutSignalDirect is the cost of one 8-byte PutSignal to another
// rank through direct stores (target: ≤ 0.1 µs).
func BenchmarkPutSignalDirect(b *testing.B) {
	data := make([]byte, 8)
	benchPair(b, 64, func(ctx context.Context, w *Window, rank int) {
		if rank != 0 {
			return
		}
		for i := 0; i < b.N; i++ {
			if err := w.PutSignal(1, 16, data, 0, uint64(i)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkNeighbourSync is one halo step of 2 and 4 ranks in a ring — 8
// bytes put to each neighbour, then synchronised — with Post, Start,
// Complete and Wait among the neighbours (pscw) or a Fence over all
// (fence), on direct stores and on libfabric shm; ns/op is one step.
func BenchmarkNeighbourSync(b *testing.B) {
	for _, path := range []struct {
		name string
		opts []Option
	}{{"direct", nil}, {"shm", shmOpts}} {
		for _, mode := range []string{"pscw", "fence"} {
			for _, n := range []int{2, 4} {
				b.Run(fmt.Sprintf("%s/%s/%d", path.name, mode, n), func(b *testing.B) {
					benchNeighbourSync(b, n, mode, path.opts...)
				})
			}
		}
	}
}

func benchNeighbourSync(b *testing.B, n int, mode string, opts ...Option) {
	data := make([]byte, 8)
	benchRanks(b, n, 16, func(ctx context.Context, w *Window, rank int) {
		left, right := (rank+n-1)%n, (rank+1)%n
		nb := []int{left}
		if right != left {
			nb = append(nb, right)
		}
		for range b.N {
			if mode == "pscw" {
				if err := w.Post(ctx, nb); err != nil {
					b.Error(err)
					return
				}
				if err := w.Start(ctx, nb); err != nil {
					b.Error(err)
					return
				}
			}
			if err := w.Put(left, 8, data); err != nil {
				b.Error(err)
				return
			}
			if err := w.Put(right, 0, data); err != nil {
				b.Error(err)
				return
			}
			var err error
			if mode == "pscw" {
				if err = w.Complete(ctx); err == nil {
					err = w.Wait(ctx)
				}
			} else {
				err = w.Fence(ctx)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	}, opts...)
}

// shmOpts puts a benchmark window on libfabric's shm provider.
var shmOpts = []Option{WithSharedMemory(ShmOff), WithProvider("shm")}

// BenchmarkPutSignalShm is the cost of issuing one 8-byte PutSignal
// through libfabric shm (rank 1 drives progress until the last signal).
func BenchmarkPutSignalShm(b *testing.B) {
	data := make([]byte, 8)
	benchPair(b, 64, func(ctx context.Context, w *Window, rank int) {
		if rank == 1 {
			if _, err := w.WaitSignal(ctx, 0, CmpGE, uint64(b.N)); err != nil {
				b.Error(err)
			}
			return
		}
		for i := 1; i <= b.N; i++ {
			if err := w.PutSignal(1, 16, data, 0, uint64(i)); err != nil {
				b.Error(err)
				return
			}
		}
	}, shmOpts...)
}

// BenchmarkGetAccumulateShm is one GetAccumulate (sum) of 256 uint64s on
// another rank through libfabric shm, waited for; the target drives
// progress in WaitSignal meanwhile.
func BenchmarkGetAccumulateShm(b *testing.B) {
	data, result := make([]byte, 8*256), make([]byte, 8*256)
	benchPair(b, 8+len(data), func(ctx context.Context, w *Window, rank int) {
		if rank == 1 {
			if _, err := w.WaitSignal(ctx, 0, CmpEQ, 1); err != nil {
				b.Error(err)
			}
			return
		}
		for range b.N {
			if err := w.GetAccumulate(1, 8, AtomicUint64, OpSum, data, result); err != nil {
				b.Error(err)
				break
			}
		}
		if err := w.Signal(1, 0, 1); err != nil {
			b.Error(err)
		}
	}, shmOpts...)
}

// BenchmarkPutSignalPingPongShm is BenchmarkPutSignalPingPongDirect through
// libfabric shm; ns/op is one round trip.
func BenchmarkPutSignalPingPongShm(b *testing.B) {
	benchPingPong(b, shmOpts...)
}

// BenchmarkPutSignalPingPongDirect is a PutSignal ping-pong between two
// goroutine ranks; ns/op is one round trip.
func BenchmarkPutSignalPingPongDirect(b *testing.B) {
	benchPingPong(b)
}

func benchPingPong(b *testing.B, opts ...Option) {
	data := make([]byte, 8)
	benchPair(b, 64, func(ctx context.Context, w *Window, rank int) {
		for i := 1; i <= b.N; i++ {
			if rank == 0 {
				_ = w.PutSignal(1, 16, data, 0, uint64(i))
				if _, err := w.WaitSignal(ctx, 0, CmpGE, uint64(i)); err != nil {
					b.Error(err)
					return
				}
			} else {
				if _, err := w.WaitSignal(ctx, 0, CmpGE, uint64(i)); err != nil {
					b.Error(err)
					return
				}
				_ = w.PutSignal(0, 16, data, 0, uint64(i))
			}
		}
	}, opts...)
}

// BenchmarkFetchAddDirect is one remote fetch-and-add through shared memory.
func BenchmarkFetchAddDirect(b *testing.B) {
	benchPair(b, 64, func(ctx context.Context, w *Window, rank int) {
		if rank != 0 {
			return
		}
		for i := 0; i < b.N; i++ {
			if _, err := w.FetchAndOp(1, 8, AtomicUint64, OpSum, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkGetTypedChunks is one typed Get of 1 MiB, contiguous at the
// target, into small blocks at the origin (3 of every 5 int64s), through
// libfabric shm: the chunk path (one read per 64 KiB chunk), whose reads
// of one chunk overlap the unpack of the previous one. ns/op is one Get,
// unpack included. (Small blocks at the target cost one RMA read each,
// which on shm takes the target's progress: that path is bound by them.)
func BenchmarkGetTypedChunks(b *testing.B) {
	const elems = 128 << 10 // int64s per Get
	vt, err := ddt.Vector(elems/3, 3, 5, ddt.Int64)
	if err == nil {
		err = vt.Commit()
	}
	ct, err2 := ddt.Contiguous(elems/3*3, ddt.Int64)
	if err2 == nil {
		err2 = ct.Commit()
	}
	if err != nil || err2 != nil {
		b.Fatal(err, err2)
	}
	span := 8 * (elems / 3 * 5)
	origin := make([]byte, span)
	b.SetBytes(8 * elems)
	benchPair(b, span+64, func(ctx context.Context, w *Window, rank int) {
		if rank == 0 {
			for i := 0; i < b.N; i++ {
				if err := w.GetTyped(ctx, 1, 0, origin, 1, vt, 1, ct); err != nil {
					b.Error(err)
					break
				}
			}
		}
		if err := w.Fence(ctx); err != nil {
			b.Error(err)
		}
	}, shmOpts...)
}

// BenchmarkGetDirect is a Get of a large block from another rank's
// window through direct loads into the same local buffer, call after
// call (the caller reads what it got next):
//
//	go test -run '^$' -bench GetDirect ./onesided/
func BenchmarkGetDirect(b *testing.B) {
	for _, n := range []int{256 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			dst := make([]byte, n)
			b.SetBytes(int64(n))
			benchPair(b, n, func(ctx context.Context, w *Window, rank int) {
				if rank != 0 {
					return
				}
				src := make([]byte, n)
				for i := range src {
					src[i] = byte(i)
				}
				// Real pages in the target's window, as a program's data are.
				if err := w.Put(1, 0, src); err != nil {
					b.Error(err)
					return
				}
				for i := 0; i < b.N; i++ {
					if err := w.Get(1, 0, dst); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkTypedNet is a PutTyped + Flush, or a GetTyped, of each of
// netTypedCases through libfabric shm, one rank driving the other's
// progress in a Fence; the contig variants move the same number of bytes
// from and to a contiguous Go buffer with Put + Flush and Get + Flush,
// the floor of the typed ones:
//
//	go test -run '^$' -bench TypedNet ./onesided/
func BenchmarkTypedNet(b *testing.B) {
	for _, c := range netTypedCases {
		ot, tt, err := c.types()
		if err != nil {
			b.Fatal(err)
		}
		n, _ := ot.PackSize(1)
		for _, mode := range []string{"put", "get", "put-contig", "get-contig"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				origin := make([]byte, c.span)
				packed := make([]byte, n)
				b.SetBytes(n)
				b.ReportAllocs()
				benchPair(b, 2<<20, func(ctx context.Context, w *Window, rank int) {
					for i := 0; rank == 0 && i < b.N; i++ {
						var err error
						switch mode {
						case "put":
							if err = w.PutTyped(1, 0, origin, 1, ot, 1, tt); err == nil {
								err = w.Flush(ctx, 1)
							}
						case "get":
							err = w.GetTyped(ctx, 1, 0, origin, 1, ot, 1, tt)
						case "put-contig":
							if err = w.Put(1, 0, packed); err == nil {
								err = w.Flush(ctx, 1)
							}
						case "get-contig":
							if err = w.Get(1, 0, packed); err == nil {
								err = w.Flush(ctx, 1)
							}
						}
						if err != nil {
							b.Error(err)
							break
						}
					}
					if err := w.Fence(ctx); err != nil {
						b.Error(err)
					}
				}, shmOpts...)
			})
		}
	}
}

// BenchmarkWindowLockDirect is an uncontended exclusive Lock and Unlock
// of another rank of the node (direct stores): two compare-and-swaps.
func BenchmarkWindowLockDirect(b *testing.B) {
	benchPair(b, 64, func(ctx context.Context, w *Window, rank int) {
		if rank != 0 {
			return
		}
		for i := 0; i < b.N; i++ {
			if err := w.Lock(ctx, 1, true); err != nil {
				b.Error(err)
				return
			}
			if err := w.Unlock(ctx, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkHeapLockDirect is SetLock and ClearLock of a lock whose home
// is another rank, uncontended (direct stores): a swap, then a
// compare-and-swap on the home rank's word, and the Quiet.
func BenchmarkHeapLockDirect(b *testing.B) {
	ctx := context.Background()
	gs := newMemWorld(2)
	hs := make([]*Heap, 2)
	locks := make([]Sym, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if hs[i], errs[i] = NewHeap(ctx, gs[i], 4096, WithSharedMemory(ShmOnly)); errs[i] != nil {
				return
			}
			// Offset 8: home rank 1 of 2.
			if _, errs[i] = hs[i].Alloc(ctx, 8, 8); errs[i] == nil {
				locks[i], errs[i] = hs[i].Alloc(ctx, 8, 8)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if _, home, _ := hs[0].lockAt("bench", locks[0]); home != 1 {
		b.Fatalf("lock's home is rank %d, want 1", home)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := hs[0].SetLock(ctx, locks[0]); err != nil {
			b.Fatal(err)
		}
		if err := hs[0].ClearLock(ctx, locks[0]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for i := range gs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = hs[i].Close(ctx) }()
	}
	wg.Wait()
}

// BenchmarkDynamicPutSignal is one 8-byte PutSignalRegion into
// AttachShared memory of another goroutine rank: by direct stores, and
// through libfabric shm with shared memory off.
func BenchmarkDynamicPutSignal(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []Option
	}{{"direct", []Option{WithProvider("shm")}}, {"shm", shmOpts}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			gs := newMemWorld(2)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			ready := make(chan struct{})
			for i := range gs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = func() (err error) {
						w, err := CreateDynamic(ctx, gs[i], c.opts...)
						if err != nil {
							return err
						}
						defer cleanup(ctx, &err, w.Free)
						var wire []byte
						var r Region
						if i == 1 {
							if r, _, err = w.AttachShared(64); err != nil {
								return err
							}
							wire, _ = r.MarshalBinary()
						}
						all, err := gs[i].Allgather(ctx, wire)
						if err != nil {
							return err
						}
						if i == 1 {
							close(ready)
							_, err := w.WaitSignalRegion(ctx, r, 0, CmpGE, uint64(b.N))
							return err
						}
						if err := r.UnmarshalBinary(all[1]); err != nil {
							return err
						}
						<-ready
						data := make([]byte, 8)
						b.ResetTimer()
						for k := 1; k <= b.N; k++ {
							if err := w.PutSignalRegion(r, 16, data, r, 0, uint64(k)); err != nil {
								return err
							}
						}
						return w.Flush(ctx, 1)
					}()
				}()
			}
			wg.Wait()
			b.StopTimer()
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
