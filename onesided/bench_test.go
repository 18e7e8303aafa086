package onesided

import (
	"context"
	"sync"
	"testing"
)

// benchPair allocates a direct-store window over two goroutine ranks and
// runs body on each; rank 0's body runs the timed loop.
func benchPair(b *testing.B, size int, body func(ctx context.Context, w *Window, rank int), opts ...Option) {
	ctx := context.Background()
	gs := newMemWorld(2)
	ws := make([]*Window, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
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
