package onesided

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/weft-hpc/weft/ddt"
)

// TestNilReceivers: every exported method on a nil *Window, *Heap,
// *WindowTransport or *Pipeline returns an error wrapping ErrInvalid (or,
// for methods without an error, a zero answer) instead of panicking; so
// do a transport's methods before Prepare.
func TestNilReceivers(t *testing.T) {
	ctx := context.Background()
	var (
		w  *Window
		h  *Heap
		tr *WindowTransport
		p  *Pipeline
	)
	unprepared := NewWindowTransport(nil)
	buf := make([]byte, 8)
	s := Sym{Off: 0, Size: 8}
	calls := map[string]func() error{
		"Window.Free":           func() error { return w.Free(ctx) },
		"Window.Put":            func() error { return w.Put(0, 0, buf) },
		"Window.Get":            func() error { return w.Get(0, 0, buf) },
		"Window.PutSignal":      func() error { return w.PutSignal(0, 0, buf, 8, 1) },
		"Window.Signal":         func() error { return w.Signal(0, 0, 1) },
		"Window.TestSignal":     func() error { _, _, err := w.TestSignal(0, CmpGE, 1); return err },
		"Window.WaitSignal":     func() error { _, err := w.WaitSignal(ctx, 0, CmpGE, 1); return err },
		"Window.Accumulate":     func() error { return w.Accumulate(0, 0, AtomicUint64, OpSum, buf) },
		"Window.GetAccumulate":  func() error { return w.GetAccumulate(0, 0, AtomicUint64, OpSum, buf, buf) },
		"Window.FetchAndOp":     func() error { _, err := w.FetchAndOp(0, 0, AtomicUint64, OpSum, 1); return err },
		"Window.CompareAndSwap": func() error { _, err := w.CompareAndSwap(0, 0, AtomicUint64, 0, 1); return err },
		"Window.Flush":          func() error { return w.Flush(ctx, 0) },
		"Window.FlushAll":       func() error { return w.FlushAll(ctx) },
		"Window.Fence":          func() error { return w.Fence(ctx) },
		"Window.PutTyped":       func() error { return w.PutTyped(0, 0, buf, 1, ddt.Int64, 1, ddt.Int64) },
		"Window.GetTyped":       func() error { return w.GetTyped(ctx, 0, 0, buf, 1, ddt.Int64, 1, ddt.Int64) },
		"Window.AccumulateTyped": func() error {
			return w.AccumulateTyped(0, 0, AtomicInt64, OpSum, buf, 1, ddt.Int64, 1, ddt.Int64)
		},
		"Window.Shared": func() error { _, err := w.Shared(0); return err },
		"SharedView":    func() error { _, err := SharedView[uint64](w, 0); return err },
		"Heap.Ptr":      func() error { _, err := h.Ptr(0, s); return err },
		"Heap.PutTyped": func() error { return h.PutTyped(0, s, 0, buf, 1, ddt.Int64, 1, ddt.Int64) },
		"Heap.GetTyped": func() error { return h.GetTyped(ctx, 0, s, 0, buf, 1, ddt.Int64, 1, ddt.Int64) },
		"Heap.AccumulateTyped": func() error {
			return h.AccumulateTyped(0, s, 0, AtomicInt64, OpSum, buf, 1, ddt.Int64, 1, ddt.Int64)
		},
		"Heap.Alloc":          func() error { _, err := h.Alloc(ctx, 8, 0); return err },
		"Heap.Fence":          func() error { return h.Fence(ctx) },
		"Heap.Broadcast":      func() error { return h.Broadcast(ctx, s, s, 8, 0) },
		"Heap.Collect":        func() error { return h.Collect(ctx, s, s, 8) },
		"Heap.Alltoall":       func() error { return h.Alltoall(ctx, s, s, 8) },
		"Heap.Reduce":         func() error { return h.Reduce(ctx, s, s, 1, AtomicInt64, OpSum) },
		"Heap.Free":           func() error { return h.Free(ctx, s) },
		"Heap.Put":            func() error { return h.Put(0, s, 0, buf) },
		"Heap.Get":            func() error { return h.Get(0, s, 0, buf) },
		"Heap.PutSignal":      func() error { return h.PutSignal(0, s, 0, nil, s, 0, 1) },
		"Heap.WaitSignal":     func() error { _, err := h.WaitSignal(ctx, s, 0, CmpGE, 1); return err },
		"Heap.Atomic":         func() error { _, err := h.Atomic(0, s, 0, AtomicUint64, OpSum, 1); return err },
		"Heap.CompareAndSwap": func() error { _, err := h.CompareAndSwap(0, s, 0, AtomicUint64, 0, 1); return err },
		"Heap.AtomicAdd":      func() error { return h.AtomicAdd(0, s, 0, AtomicUint64, 1) },
		"Heap.AtomicInc":      func() error { return h.AtomicInc(0, s, 0, AtomicUint64) },
		"Heap.AtomicSet":      func() error { return h.AtomicSet(0, s, 0, AtomicUint64, 1) },
		"Heap.AtomicAnd":      func() error { return h.AtomicAnd(0, s, 0, AtomicUint64, 1) },
		"Heap.AtomicOr":       func() error { return h.AtomicOr(0, s, 0, AtomicUint64, 1) },
		"Heap.AtomicXor":      func() error { return h.AtomicXor(0, s, 0, AtomicUint64, 1) },
		"Heap.AtomicAddN":     func() error { return h.AtomicAddN(0, s, 0, AtomicUint64, []uint64{1}) },
		"Heap.AtomicN":        func() error { return h.AtomicN(0, s, 0, AtomicUint64, OpMax, []uint64{1}) },
		"Heap.Quiet":          func() error { return h.Quiet(ctx) },
		"Heap.Barrier":        func() error { return h.Barrier(ctx) },
		"Heap.Close":          func() error { return h.Close(ctx) },
		"WindowTransport.Prepare": func() error {
			return tr.Prepare(ctx, 64, 1, 1)
		},
		"WindowTransport.Send":     func() error { return tr.Send(0, 0, 0, 8, 1) },
		"WindowTransport.Wait":     func() error { return tr.Wait(ctx, 0, 0, 1) },
		"WindowTransport.SendDone": func() error { return tr.SendDone(ctx, 0) },
		"WindowTransport.Close":    func() error { return tr.Close(ctx) },
		"unprepared.Prepare":       func() error { return unprepared.Prepare(ctx, 64, 1, 1) },
		"unprepared.Send":          func() error { return unprepared.Send(0, 0, 0, 8, 1) },
		"unprepared.Wait":          func() error { return unprepared.Wait(ctx, 0, 0, 1) },
		"unprepared.SendDone":      func() error { return unprepared.SendDone(ctx, 0) },
		"Pipeline.Run": func() error {
			return p.Run(ctx, func(Tile, [][]byte) error { return nil }, func(Tile, [][]byte) error { return nil })
		},
		"NewPipeline(nil transport)": func() error {
			_, err := NewPipeline(ctx, tr, PipelineConfig{N: 4, K: 2, D: 1, BytesPerIter: 8})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				return call()
			}()
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		})
	}
	if w.Rank() != -1 || w.Size() != 0 || w.Len(0) != 0 || w.Bytes() != nil || w.Direct(0) ||
		w.Provider() != "" || w.Ordering() != OrderAuto || h.Window() != nil || h.Local(s) != nil ||
		tr.Rank() != -1 || tr.Size() != 0 || tr.Window() != nil || tr.SendBuf(0, 0) != nil ||
		tr.RecvBuf(0, 0) != nil || unprepared.SendBuf(0, 0) != nil || unprepared.RecvBuf(0, 0) != nil ||
		p.Config() != (PipelineConfig{}) {
		t.Error("a nil receiver's accessor returned something")
	}
}

// TestFreeDuringWaitSignal: Free of a window while other goroutines wait
// in WaitSignal on it makes the waiters return ErrClosed, and unmaps the
// window only once they have left (a waiter used to read the unmapped
// signal word: SIGSEGV). Later WaitSignal and TestSignal calls get
// ErrClosed too.
func TestFreeDuringWaitSignal(t *testing.T) {
	for _, c := range []struct {
		name    string
		waiters int // the libfabric path is not for concurrent use: one
		opts    []Option
	}{
		{"direct", 3, []Option{WithSharedMemory(ShmOnly)}},
		{"shm", 1, []Option{WithSharedMemory(ShmOff), WithProvider("shm")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "shm" {
				requireProvider(t, "shm")
			}
			runRanks(t, 1, func(ctx context.Context, g Group) error {
				w, err := Allocate(ctx, g, 64, c.opts...)
				if err != nil {
					return err
				}
				var wg sync.WaitGroup
				errs := make([]error, c.waiters)
				for i := range errs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						cmp := CmpGE // waitGE
						if i%2 == 1 {
							cmp = CmpEQ // the generic loop
						}
						_, errs[i] = w.WaitSignal(ctx, 8*i, cmp, 1)
					}()
				}
				// Free once every waiter is inside WaitSignal.
				for w.waiters.Load() < int32(c.waiters) {
					runtime.Gosched()
				}
				if err := w.Free(ctx); err != nil {
					return fmt.Errorf("Free: %w", err)
				}
				wg.Wait()
				for i, err := range errs {
					if !errors.Is(err, ErrClosed) {
						return fmt.Errorf("waiter %d after Free: %v, want ErrClosed", i, err)
					}
				}
				if _, err := w.WaitSignal(ctx, 0, CmpGE, 1); !errors.Is(err, ErrClosed) {
					return fmt.Errorf("WaitSignal after Free: %v, want ErrClosed", err)
				}
				if _, _, err := w.TestSignal(0, CmpGE, 1); !errors.Is(err, ErrClosed) {
					return fmt.Errorf("TestSignal after Free: %v, want ErrClosed", err)
				}
				return nil
			})
		})
	}
}
