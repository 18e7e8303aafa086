package onesided

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/weft-hpc/weft/fabric"
)

// Signals in remote CQ data (OrderCQData): forced on and forced off
// (OrderWAW) on every provider that grants write-after-write ordering.
var cqCases = []providerCase{
	{"shm", OrderCQData}, {"shm", OrderWAW},
	{"tcp;ofi_rxm", OrderCQData}, {"tcp;ofi_rxm", OrderWAW},
	{"sockets", OrderCQData},
}

func fabOf(w *Window) *fabPath {
	f := netFab(w.net)
	return f
}

// sinkApplied is how many signals this rank's sink has stored (0 without
// a sink).
func sinkApplied(w *Window) uint64 {
	if f := fabOf(w); f != nil && f.sink != nil {
		return f.sink.Applied()
	}
	return 0
}

// TestNetCQDataChosen: auto picks signals in CQ data where the provider
// has manual progress, WAW and 8 bytes of CQ data (shm), not on sockets
// (automatic progress); forcing it works where it can; each rank takes
// them only when it is in that mode itself, and a rank in another mode
// gets WAW signals from a rank that is.
func TestNetCQDataChosen(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		other := 1 - g.Rank()
		for _, c := range []struct {
			pc   providerCase
			want SignalOrdering
		}{
			{providerCase{"shm", OrderAuto}, OrderCQData},
			{providerCase{"shm", OrderCQData}, OrderCQData},
			{providerCase{"shm", OrderWAW}, OrderWAW},
			{providerCase{"sockets", OrderAuto}, OrderWAW},
		} {
			if c.pc.prov == "sockets" {
				if _, err := fabric.GetInfo(&fabric.Hints{Provider: "sockets", Caps: fabric.CapRMA}); err != nil {
					continue
				}
			}
			w, err := Allocate(ctx, g, 4096, c.pc.opts()...)
			if err != nil {
				return fmt.Errorf("%s: %w", c.pc.name(), err)
			}
			f := fabOf(w)
			cq := c.want == OrderCQData
			if w.Ordering() != c.want || (f.sink != nil) != cq || f.cqSig[other] != cq || f.cqSig[g.Rank()] {
				return fmt.Errorf("%s: ordering %v, sink %v, cqSig %v; want %v", c.pc.name(), w.Ordering(), f.sink != nil, f.cqSig, c.want)
			}
			if err := w.Free(ctx); err != nil {
				return err
			}
		}
		// Rank 0 sends signals in CQ data, rank 1 (forced to WAW) takes
		// none and sends plain ones: both must work.
		order := OrderCQData
		if g.Rank() == 1 {
			order = OrderWAW
		}
		opts := providerCase{"shm", order}.opts()
		w, err := Allocate(ctx, g, 64, opts...)
		if err != nil {
			return err
		}
		if f := fabOf(w); f.cqSig[other] {
			return fmt.Errorf("rank %d would send CQ data to a rank without a sink", g.Rank())
		}
		if err := w.Free(ctx); err != nil {
			return err
		}
		return putSignalStressSizes(ctx, g, 100, []int{8, 5000, 0}, opts...)
	})
}

func TestNetCQDataForcedUnsupported(t *testing.T) {
	requireProvider(t, "tcp;ofi_rxm")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		// With atomics ofi_rxm grants no WAW; forcing CQ data then
		// selects a configuration without atomics, which works.
		w, err := Allocate(ctx, g, 64, providerCase{"tcp;ofi_rxm", OrderCQData}.opts()...)
		if err != nil {
			return fmt.Errorf("forcing cqdata on tcp;ofi_rxm: %w", err)
		}
		if w.Ordering() != OrderCQData {
			return fmt.Errorf("ordering %v", w.Ordering())
		}
		return w.Free(ctx)
	})
}

// TestNetCQDataStress is the put-with-signal stress, every payload byte
// checked after each signal, with sizes that are injected with the signal
// in their CQ data (≤ 4 KiB), and larger ones that fall back to a tracked
// data write followed by the signal alone; forced on and forced off.
func TestNetCQDataStress(t *testing.T) {
	sizes := []int{8, 4096, 4097, 24 << 10, 64 << 10, 0, 1, 300}
	for _, c := range cqCases {
		t.Run(c.name(), func(t *testing.T) {
			requireProvider(t, c.prov)
			iters := c.scaled(400, 60)
			runRanks(t, 2, func(ctx context.Context, g Group) error {
				var f *fabPath
				if err := putSignalStressSizesHook(ctx, g, iters, sizes, func(w *Window) { f = fabOf(w) }, c.opts()...); err != nil {
					return err
				}
				// Forced on, every signal (iters, and as many
				// acknowledgements) went through the sink; off, none.
				switch {
				case f.sink != nil && f.sink.Applied() < uint64(2*iters):
					return fmt.Errorf("the sink stored %d signals of %d", f.sink.Applied(), 2*iters)
				case f.sink == nil && c.order == OrderCQData:
					return fmt.Errorf("no signal sink with %v", c.order)
				case f.sink != nil && c.order != OrderCQData:
					return fmt.Errorf("a signal sink with %v", c.order)
				}
				return nil
			})
		})
	}
}

// TestNetCQDataDeferred shrinks the WAW limit so that large PutSignals take
// the delivery-ordered path: the signal is queued until the data's
// delivery completion and then sent, from inside progress, as CQ data.
func TestNetCQDataDeferred(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		opts := providerCase{"shm", OrderCQData}.opts()
		return putSignalStressSizesHook(ctx, g, 300, []int{8, 10000, 64 << 10, 0, 9000, 100}, func(w *Window) {
			f := fabOf(w)
			f.wawMax, f.injMax = 8192, 4096
		}, opts...)
	})
}

// TestNetCQDataLastWins: signals to one word from one origin — small and
// large values (one CQ data word or three parts), with small data, large
// data (tracked write, then the signal) or none — are stored in the order
// they were issued: after a final signal elsewhere the word holds the last
// value, and every payload is in place. Forced on and off.
func TestNetCQDataLastWins(t *testing.T) {
	for _, c := range cqCases {
		t.Run(c.name(), func(t *testing.T) {
			requireProvider(t, c.prov)
			rounds := c.scaled(200, 30)
			runRanks(t, 2, func(ctx context.Context, g Group) error {
				return lastWins(ctx, g, rounds, c.opts()...)
			})
		})
	}
}

func lastWins(ctx context.Context, g Group, rounds int, opts ...Option) (err error) {
	const word, done, data, big = 0, 8, 64, 40 << 10
	w, err := Allocate(ctx, g, data+big, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	huge := func(i int) uint64 { return math.MaxUint64 - uint64(i) } // never fits one word
	bufs := [2][]byte{make([]byte, big), make([]byte, big)}
	for r := 1; r <= rounds; r++ {
		seq := []uint64{uint64(r), huge(r), uint64(3 * r), huge(2 * r)}
		if r%3 == 0 {
			seq = seq[:3] // ends with a small value
		}
		if g.Rank() == 0 {
			buf := bufs[r%2]
			size := []int{16, 3000, big, 0}[r%4]
			fill(buf[:size], 0, r)
			for i, v := range seq {
				var err error
				if i == len(seq)-1 {
					err = w.PutSignal(1, data, buf[:size], word, v)
				} else {
					err = w.Signal(1, word, v)
				}
				if err != nil {
					return err
				}
			}
			if err := w.Signal(1, done, uint64(r)); err != nil {
				return err
			}
			// The acknowledgement: rank 1 checked this round.
			if _, err := w.WaitSignal(ctx, done, CmpGE, uint64(r)); err != nil {
				return err
			}
			continue
		}
		if _, err := w.WaitSignal(ctx, done, CmpGE, uint64(r)); err != nil {
			return err
		}
		if v, want := atomic.LoadUint64((*uint64)(unsafe.Pointer(&w.Bytes()[word]))), seq[len(seq)-1]; v != want {
			return fmt.Errorf("round %d: word %#x after the final signal, want the last value %#x", r, v, want)
		}
		size := []int{16, 3000, big, 0}[r%4]
		if err := checkFill(w.Bytes()[data:data+size], 0, r); err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		if err := w.Signal(0, done, uint64(r)); err != nil {
			return err
		}
	}
	return w.Fence(ctx)
}

// TestNetCQDataEncodingEdges: the largest value that travels in one CQ
// data word, and the smallest that needs three parts, both at the last
// word of the window; bad offsets fail with clear errors; CQ data that is
// not a signal reaches the target as an error, not as a store.
func TestNetCQDataEncodingEdges(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
		const size = 4096
		w, err := Allocate(ctx, g, size, providerCase{"shm", OrderCQData}.opts()...)
		if err != nil {
			return err
		}
		defer cleanup(ctx, &err, w.Free)
		f := fabOf(w)
		other := 1 - g.Rank()
		// The registered region is the control words and the window,
		// page-rounded: 8 KiB here, 1024 slots, 10 slot bits.
		sb := fabric.SignalSlotBits(regionBytes(size, 2))
		if f.slotBits[other] != sb || f.sink.SlotBits() != sb || sb != 10 {
			return fmt.Errorf("slot bits: target %d, sink %d, want %d (10)", f.slotBits[other], f.sink.SlotBits(), sb)
		}
		maxFit := uint64(1)<<uint(fabric.SignalValueBits(sb)) - 1
		last := size - 8
		for i, c := range []struct {
			v     uint64
			parts uint64 // stores the target's sink makes
		}{{maxFit, 1}, {maxFit + 1, 3}, {math.MaxUint64, 3}, {0, 1}, {maxFit - 1, 1}} {
			before := sinkApplied(w)
			if err := w.Fence(ctx); err != nil {
				return err
			}
			if g.Rank() == 0 {
				if err := w.PutSignal(1, 64, []byte{byte(i), 1, 2}, last, c.v); err != nil {
					return err
				}
			} else {
				if _, err := w.WaitSignal(ctx, last, CmpEQ, c.v); err != nil {
					return fmt.Errorf("value %#x: %w", c.v, err)
				}
				if got := sinkApplied(w) - before; got != c.parts {
					return fmt.Errorf("value %#x took %d stores, want %d", c.v, got, c.parts)
				}
				if w.Bytes()[64] != byte(i) {
					return fmt.Errorf("value %#x: data not in place", c.v)
				}
			}
		}
		// Bad offsets are refused before anything is sent.
		for _, c := range []struct {
			off  int
			want error
		}{{12, ErrInvalid}, {size, ErrOutOfRange}, {last + 8, ErrOutOfRange}, {-8, ErrOutOfRange}, {3, ErrInvalid}} {
			if err := w.Signal(other, c.off, 1); !errors.Is(err, c.want) {
				return fmt.Errorf("signal at offset %d: %v, want %v", c.off, err, c.want)
			}
		}
		var words [3]uint64
		if _, err := f.sigWords(&words, other, 12, 1); !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("a misaligned offset encoded: %v", err)
		}
		// CQ data that is no signal (a peer's bug): the target reports it
		// from whichever call reads it first (the Fence, or the wait).
		fenceErr := w.Fence(ctx)
		if g.Rank() == 0 {
			if fenceErr != nil {
				return fenceErr
			}
			err := f.post(untracked, func() error {
				return f.ep.InjectWriteData(nil, 0x1234, f.addrs[1], f.raddr(1, ctrlBytes), f.keys[1])
			})
			if err != nil {
				return err
			}
			f.markDirty(1)
			if err := w.Flush(ctx, 1); err != nil {
				return err
			}
		} else {
			err := fenceErr
			if err == nil {
				_, err = w.WaitSignal(ctx, 0, CmpEQ, 99)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "0x1234") {
				return fmt.Errorf("foreign CQ data: %v", err)
			}
		}
		return w.Fence(ctx)
	})
}

// TestNetCQDataPassiveTarget: a target that never waits for the signal
// still stores it whenever anything drives progress on the window (a
// TestSignal of another word here), and after a Fence without any.
func TestNetCQDataPassiveTarget(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
		w, err := Allocate(ctx, g, 4096, providerCase{"shm", OrderCQData}.opts()...)
		if err != nil {
			return err
		}
		defer cleanup(ctx, &err, w.Free)
		sig := (*uint64)(unsafe.Pointer(&w.Bytes()[0]))
		msg := []byte("passive target")
		for round := uint64(1); round <= 50; round++ {
			if g.Rank() == 0 {
				if err := w.PutSignal(1, 64, msg, 0, round); err != nil {
					return err
				}
				if err := w.Flush(ctx, 1); err != nil {
					return err
				}
			} else {
				for atomic.LoadUint64(sig) != round {
					if _, _, err := w.TestSignal(8, CmpEQ, 1); err != nil {
						return err
					}
					if err := ctx.Err(); err != nil {
						return fmt.Errorf("round %d: signal %d: %w", round, atomic.LoadUint64(sig), err)
					}
				}
				if string(w.Bytes()[64:64+len(msg)]) != string(msg) {
					return fmt.Errorf("round %d: data not in place", round)
				}
			}
			if err := w.Fence(ctx); err != nil {
				return err
			}
		}
		// Fence alone makes it visible.
		for round := uint64(100); round < 150; round++ {
			if g.Rank() == 0 {
				if err := w.PutSignal(1, 64, msg, 16, round); err != nil {
					return err
				}
			}
			if err := w.Fence(ctx); err != nil {
				return err
			}
			if g.Rank() == 1 {
				if v := atomic.LoadUint64((*uint64)(unsafe.Pointer(&w.Bytes()[16]))); v != round {
					return fmt.Errorf("after Fence the signal word holds %d, want %d", v, round)
				}
			}
			// Rank 0 leaves the Fence before rank 1 has looked: without
			// this one its next PutSignal could land first (rank 1's
			// Fence reads its completion queue once more on the way out).
			if err := w.Fence(ctx); err != nil {
				return err
			}
		}
		// A PutSignal to itself is a store (direct), in either mode.
		if err := w.PutSignal(g.Rank(), 1024, msg, 24, 5); err != nil {
			return err
		}
		if v, err := w.WaitSignal(ctx, 24, CmpEQ, 5); err != nil || v != 5 || string(w.Bytes()[1024:1024+len(msg)]) != string(msg) {
			return fmt.Errorf("PutSignal to self: %d, %v", v, err)
		}
		return w.Fence(ctx)
	})
}
