package onesided

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// TestCrossLayerProgress: a rank blocked in one layer must keep the other
// layer progressing. Without direct stores (and on tcp;ofi_rxm, whose
// progress is manual) an RMA operation completes only when its target
// reads its window's completion queue, and an endpoint message only when
// its receiver reads the endpoint's. Each scenario blocks one rank in an
// endpoint call (Allgather, Barrier, Recv) while its peer waits in a
// window call on it (Heap.Get + Quiet, FetchAndOp, Put + Flush), or blocks
// it in WaitSignal while its peer's send waits for it. Every wait is
// bounded (contexts of waitLimit, WEFT_ONESIDED_TIMEOUT for the calls
// without one), so a deadlock fails the test within seconds.
func TestCrossLayerProgress(t *testing.T) {
	const waitLimit = 10 * time.Second
	for _, c := range []struct{ name, provider string }{
		{"shm", "shm"},
		{"tcp", "tcp;ofi_rxm"},
	} {
		for _, s := range crossScenarios {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				if !launchtest.IsWorker() {
					requireProvider(t, c.provider)
					launchtest.Run(t, 2, c.provider, 60*time.Second,
						"WEFT_ONESIDED_SHM=off", "WEFT_ONESIDED_TIMEOUT="+waitLimit.String())
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
				defer cancel()
				w, err := endpoint.Init(ctx)
				if err != nil {
					t.Fatalf("endpoint.Init: %v", err)
				}
				defer w.Close()
				comm := w.Comm()
				rank := comm.Rank()
				h, err := NewHeap(ctx, comm, 1<<20)
				if err != nil {
					t.Fatalf("rank %d: NewHeap: %v", rank, err)
				}
				sctx, scancel := context.WithTimeout(ctx, waitLimit)
				start := time.Now()
				err = s.body(sctx, comm, h)
				scancel()
				if err != nil {
					t.Fatalf("rank %d: %v (after %v)", rank, err, time.Since(start))
				}
				if err := h.Close(ctx); err != nil {
					t.Fatalf("rank %d: heap close: %v", rank, err)
				}
			})
		}
	}
}

type crossScenario struct {
	name string
	body func(ctx context.Context, c *endpoint.Comm, h *Heap) error
}

var crossScenarios = []crossScenario{
	{"get-quiet/allgather", func(ctx context.Context, c *endpoint.Comm, h *Heap) error {
		// Rank 0 reads rank 1's object while rank 1 waits in Allgather.
		s, err := h.Alloc(ctx, 64<<10, 8)
		if err != nil {
			return err
		}
		defer h.Free(ctx, s)
		pattern := func(r int) []byte { return bytes.Repeat([]byte{byte(0x40 + r)}, 64<<10) }
		copy(h.Local(s), pattern(c.Rank()))
		if err := h.Barrier(ctx); err != nil {
			return err
		}
		if c.Rank() == 0 {
			for _, n := range []int{8, 64 << 10} {
				dst := make([]byte, n)
				if err := h.Get(1, s, 0, dst); err != nil {
					return fmt.Errorf("Get %d bytes: %w", n, err)
				}
				if err := h.Quiet(ctx); err != nil {
					return fmt.Errorf("Quiet after Get: %w", err)
				}
				if !bytes.Equal(dst, pattern(1)[:n]) {
					return fmt.Errorf("Get %d bytes: wrong data", n)
				}
			}
		}
		all, err := c.Allgather(ctx, []byte{byte(c.Rank())})
		if err != nil {
			return fmt.Errorf("Allgather: %w", err)
		}
		if len(all) != c.Size() {
			return fmt.Errorf("Allgather: %d parts", len(all))
		}
		return nil
	}},
	{"fetch-op/barrier", func(ctx context.Context, c *endpoint.Comm, h *Heap) error {
		// Rank 0 runs atomics on rank 1's memory while rank 1 waits in
		// Barrier.
		s, err := h.Alloc(ctx, 8, 8)
		if err != nil {
			return err
		}
		defer h.Free(ctx, s)
		if c.Rank() == 0 {
			for i := uint64(0); i < 3; i++ {
				old, err := h.Atomic(1, s, 0, AtomicUint64, OpSum, 1)
				if err != nil {
					return fmt.Errorf("fetch-and-add: %w", err)
				}
				if old != i {
					return fmt.Errorf("fetch-and-add %d returned %d", i, old)
				}
			}
			if _, err := h.CompareAndSwap(1, s, 0, AtomicUint64, 3, 7); err != nil {
				return fmt.Errorf("compare-and-swap: %w", err)
			}
		}
		return c.Barrier(ctx)
	}},
	{"put-flush/recv", func(ctx context.Context, c *endpoint.Comm, h *Heap) error {
		// Rank 0 writes into rank 1's memory and flushes while rank 1
		// waits in Recv for rank 0's message saying so.
		s, err := h.Alloc(ctx, 64<<10, 8)
		if err != nil {
			return err
		}
		defer h.Free(ctx, s)
		data := bytes.Repeat([]byte{0x5a}, 64<<10)
		switch c.Rank() {
		case 0:
			if err := h.Put(1, s, 0, data[:8]); err != nil {
				return err
			}
			if err := h.Put(1, s, 8, data[8:]); err != nil {
				return err
			}
			if err := h.Quiet(ctx); err != nil {
				return fmt.Errorf("Quiet after Put: %w", err)
			}
			return c.Send(ctx, []byte("done"), 1, 3)
		case 1:
			buf := make([]byte, 8)
			if _, err := c.Recv(ctx, buf, 0, 3); err != nil {
				return fmt.Errorf("Recv: %w", err)
			}
			if !bytes.Equal(h.Local(s), data) {
				return fmt.Errorf("Put data not in place after the flush")
			}
		}
		return nil
	}},
	{"send/wait-signal", func(ctx context.Context, c *endpoint.Comm, h *Heap) error {
		// Rank 1 sends to rank 0 and only then signals it, while rank 0
		// waits in WaitSignal before it receives.
		sig, err := h.Alloc(ctx, 16, 8)
		if err != nil {
			return err
		}
		defer h.Free(ctx, sig)
		msg := bytes.Repeat([]byte{0x33}, 8<<10)
		switch c.Rank() {
		case 0:
			if _, err := h.WaitSignal(ctx, sig, 0, CmpGE, 1); err != nil {
				return fmt.Errorf("WaitSignal: %w", err)
			}
			buf := make([]byte, len(msg))
			if _, err := c.Recv(ctx, buf, 1, 4); err != nil {
				return fmt.Errorf("Recv: %w", err)
			}
			if !bytes.Equal(buf, msg) {
				return fmt.Errorf("Recv: wrong data")
			}
		case 1:
			if err := c.Send(ctx, msg, 0, 4); err != nil {
				return fmt.Errorf("Send: %w", err)
			}
			if err := h.PutSignal(0, sig, 8, []byte{1, 2, 3, 4, 5, 6, 7, 8}, sig, 0, 1); err != nil {
				return fmt.Errorf("PutSignal: %w", err)
			}
			if err := h.Quiet(ctx); err != nil {
				return fmt.Errorf("Quiet after PutSignal: %w", err)
			}
		}
		return nil
	}},
}
