package onesided

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/internal/testenv"
)

// providerCase is one libfabric configuration the network path is tested on.
type providerCase struct {
	prov  string
	order SignalOrdering
}

// scaled is n, or onSockets for the sockets provider, which crawls on two
// oversubscribed cores.
func (c providerCase) scaled(n, onSockets int) int {
	if c.prov == "sockets" {
		return onSockets
	}
	return n
}

// netCases lists every (provider, ordering) pair to test; a pair is
// skipped only if the provider genuinely does not grant the ordering.
var netCases = []providerCase{
	{"shm", OrderAuto}, {"shm", OrderWAW}, {"shm", OrderDelivery}, {"shm", OrderCQData},
	{"tcp;ofi_rxm", OrderAuto}, {"tcp;ofi_rxm", OrderDelivery}, {"tcp;ofi_rxm", OrderCQData},
	{"sockets", OrderWAW}, {"sockets", OrderDelivery}, {"sockets", OrderCQData},
}

func (c providerCase) opts() []Option {
	return []Option{WithSharedMemory(ShmOff), WithProvider(c.prov), WithSignalOrdering(c.order)}
}

func (c providerCase) name() string { return c.prov + "/" + c.order.String() }

// requireProvider skips when the provider is absent from this libfabric
// (feature "provider:<prov>" of internal/testenv: a failure instead when
// WEFT_REQUIRE or WEFT_REQUIRE_PROVIDERS claims it), or left out by
// WEFT_TEST_PROVIDERS (testenv.Provider).
func requireProvider(t *testing.T, prov string) {
	t.Helper()
	testenv.Provider(t, prov)
	if _, err := fabric.GetInfo(&fabric.Hints{Provider: prov, Caps: fabric.CapRMA}); err != nil {
		if errors.Is(err, fabric.ErrNoProvider) {
			testenv.Skip(t, "provider:"+prov, "libfabric provider %q is not available here: %v", prov, err)
		}
		t.Fatalf("GetInfo(%s): %v", prov, err)
	}
}

func TestNetPutSignalEveryOrdering(t *testing.T) {
	for _, c := range netCases {
		t.Run(c.name(), func(t *testing.T) {
			requireProvider(t, c.prov)
			iters, payload := c.scaled(150, 30), c.scaled(48<<10, 8<<10)
			runRanks(t, 2, func(ctx context.Context, g Group) error {
				return putSignalStress(ctx, g, iters, payload, c.opts()...)
			})
		})
	}
}

// TestNetPutSignalSmall mixes PutSignal sizes across the injection limit
// (small ones are injected without completions on WAW providers, larger
// ones tracked or delivery-ordered) on every provider and ordering, and
// checks that Flush covers injected writes (small Puts and PutSignals).
func TestNetPutSignalSmall(t *testing.T) {
	sizes := []int{8, 64, 256, 264, 4096, 4104, 24 << 10, 0}
	for _, c := range netCases {
		t.Run(c.name(), func(t *testing.T) {
			requireProvider(t, c.prov)
			iters := c.scaled(400, 60)
			runRanks(t, 2, func(ctx context.Context, g Group) error {
				if err := putSignalStressSizes(ctx, g, iters, sizes, c.opts()...); err != nil {
					return err
				}
				return flushCoversPutSignal(ctx, g, c.opts()...)
			})
		})
	}
}

// flushCoversPutSignal: rank 0 Puts and PutSignals small messages to rank 1 (which
// does nothing but wait in a barrier, driving progress), flushes, and reads
// them back with Get: after Flush every write must be at the target.
func flushCoversPutSignal(ctx context.Context, g Group, opts ...Option) (err error) {
	const n, size = 64, 24
	w, err := Allocate(ctx, g, 64+n*size, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	if g.Rank() == 0 {
		for round := 1; round <= 3; round++ {
			for i := 0; i < n; i++ {
				b := make([]byte, size)
				fill(b, round, i)
				var err error
				if i%2 == 0 {
					err = w.Put(1, 64+i*size, b)
				} else {
					err = w.PutSignal(1, 64+i*size, b, 8*(i%4), uint64(round*n+i))
				}
				if err != nil {
					return err
				}
			}
			if err := w.Flush(ctx, 1); err != nil {
				return err
			}
			got := make([]byte, n*size)
			if err := w.Get(1, 64, got); err != nil {
				return err
			}
			if err := w.Flush(ctx, 1); err != nil {
				return err
			}
			for i := 0; i < n; i++ {
				if err := checkFill(got[i*size:(i+1)*size], round, i); err != nil {
					return fmt.Errorf("round %d, message %d read back after Flush: %w", round, i, err)
				}
			}
		}
	}
	return w.Fence(ctx)
}

// TestNetFenceSockets forces the FI_FENCE ordering in one direction: rank 0
// PutSignals (data write, then the signal write with FI_FENCE) and rank 1
// checks the data behind every signal and acknowledges with a data-less
// signal, which carries no fence. sockets is the only provider here that
// offers FI_FENCE.
func TestNetFenceSockets(t *testing.T) {
	requireProvider(t, "sockets")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		return putSignalOneWay(ctx, g, 200, []int{8, 512, 8 << 10, 64 << 10}, providerCase{"sockets", OrderFence}.opts()...)
	})
}

// TestNetFenceSocketsBothWays is the ring stress with FI_FENCE in both
// directions at once. libfabric 1.17's sockets provider stalls there: in most
// runs neither rank's first fenced write is ever delivered (both wait for
// signal 1; never an ordering violation, and the same test passes every time
// without the fence flag, or with fenced writes in one direction only, as in
// TestNetFenceSockets). It is opt-in: WEFT_TEST_SOCKETS_FENCE=1 runs it.
// Otherwise it skips as feature "sockets-fence-both-ways" (a working
// provider, not a package of this machine), which WEFT_REQUIRE=all turns
// into a failure: that libfabric does not have it.
func TestNetFenceSocketsBothWays(t *testing.T) {
	requireProvider(t, "sockets")
	if os.Getenv("WEFT_TEST_SOCKETS_FENCE") != "1" {
		testenv.Skip(t, "sockets-fence-both-ways", "libfabric 1.17 sockets stalls fenced writes sent both ways at once (see the test comment); WEFT_TEST_SOCKETS_FENCE=1 runs it")
	}
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		return putSignalStress(ctx, g, 30, 8<<10, providerCase{"sockets", OrderFence}.opts()...)
	})
}

// putSignalOneWay: rank 0 PutSignals iters messages of the given sizes to
// rank 1, alternating two slots; rank 1 checks each message's data as soon
// as its signal is visible and acknowledges it, which lets rank 0 reuse the
// slot two messages later.
func putSignalOneWay(ctx context.Context, g Group, iters int, sizes []int, opts ...Option) (err error) {
	payload := 0
	for _, s := range sizes {
		payload = max(payload, s)
	}
	const sig, ack, data = 0, 8, 64
	w, err := Allocate(ctx, g, data+2*payload, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	src := [2][]byte{make([]byte, payload), make([]byte, payload)}
	for it := 1; it <= iters; it++ {
		slot, n := it%2, sizes[it%len(sizes)]
		if g.Rank() == 0 {
			if it > 2 {
				if _, err := w.WaitSignal(ctx, ack, CmpGE, uint64(it-2)); err != nil {
					return err
				}
			}
			fill(src[slot][:n], 0, it)
			if err := w.PutSignal(1, data+slot*payload, src[slot][:n], sig, uint64(it)); err != nil {
				return err
			}
			continue
		}
		if _, err := w.WaitSignal(ctx, sig, CmpGE, uint64(it)); err != nil {
			return err
		}
		if err := checkFill(w.Bytes()[data+slot*payload:][:n], 0, it); err != nil {
			return fmt.Errorf("iteration %d: signal visible before data: %w", it, err)
		}
		if err := w.Signal(0, ack, uint64(it)); err != nil {
			return err
		}
	}
	return w.Fence(ctx)
}

func TestNetOrderingReported(t *testing.T) {
	requireProvider(t, "sockets")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		for _, c := range []providerCase{{"sockets", OrderAuto}, {"sockets", OrderFence}, {"shm", OrderDelivery}} {
			w, err := Allocate(ctx, g, 64, c.opts()...)
			if err != nil {
				return err
			}
			other := 1 - g.Rank()
			if w.Provider() != c.prov || w.Direct(other) || !w.Direct(g.Rank()) {
				return fmt.Errorf("%s: provider %q direct to other %v, to self %v", c.name(), w.Provider(), w.Direct(other), w.Direct(g.Rank()))
			}
			if c.order != OrderAuto && w.Ordering() != c.order {
				return fmt.Errorf("%s: ordering %v", c.name(), w.Ordering())
			}
			if c.order == OrderAuto && w.Ordering() != OrderWAW {
				return fmt.Errorf("sockets grants WAW but auto chose %v", w.Ordering())
			}
			if err := w.Free(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestNetForcedFenceUnsupported(t *testing.T) {
	requireProvider(t, "tcp;ofi_rxm")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		_, err := Allocate(ctx, g, 64, providerCase{"tcp;ofi_rxm", OrderFence}.opts()...)
		if !errors.Is(err, ErrNotSupported) {
			return fmt.Errorf("forcing FI_FENCE on tcp;ofi_rxm: %v", err)
		}
		return nil
	})
}

func TestNetAtomicsContention(t *testing.T) {
	for _, prov := range []string{"shm", "tcp;ofi_rxm"} {
		t.Run(prov, func(t *testing.T) {
			requireProvider(t, prov)
			runRanks(t, 3, func(ctx context.Context, g Group) error {
				return atomicsContention(ctx, g, 200, providerCase{prov, OrderAuto}.opts()...)
			})
		})
	}
}

func TestNetWindowErrors(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		return windowErrors(ctx, g, providerCase{"shm", OrderAuto}.opts()...)
	})
}

func TestNetPipelineMatchesExchange(t *testing.T) {
	// In-process ranks on two cores are slow with libfabric; the full
	// matrix runs on every provider in TestMultiProcess.
	shapes := []PipelineConfig{{N: 7, K: 3, D: 1, BytesPerIter: 24}, {N: 16, K: 4, D: 3, BytesPerIter: 300},
		{N: 33, K: 5, D: 2, BytesPerIter: 4096}}
	for _, c := range []providerCase{{"shm", OrderAuto}, {"tcp;ofi_rxm", OrderDelivery}} {
		t.Run(c.name(), func(t *testing.T) {
			requireProvider(t, c.prov)
			runRanks(t, 3, func(ctx context.Context, g Group) error {
				return pipelineMatrix(ctx, g, shapes, c.opts()...)
			})
		})
	}
}

func TestNetHeap(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 3, func(ctx context.Context, g Group) error {
		if err := heapScenario(ctx, g, providerCase{"shm", OrderAuto}.opts()...); err != nil {
			return err
		}
		return heapCollScenario(ctx, g, providerCase{"shm", OrderAuto}.opts()...)
	})
}

// TestNetTimeout: an atomic against a rank that makes no progress fails
// with ErrTimeout (WithTimeout) instead of hanging, and the
// window stays usable.
func TestNetTimeout(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		w, err := Allocate(ctx, g, 64, append(providerCase{"shm", OrderAuto}.opts(), WithTimeout(300*time.Millisecond))...)
		if err != nil {
			return err
		}
		// Rank 1 sits in a group barrier until rank 0 gave up, its window
		// held busy as if another goroutine of its were inside a call:
		// rank 0's wait cannot drive its progress (internal/progress).
		gp, _ := w.net.(*guardedPath)
		if g.Rank() == 1 && gp != nil {
			gp.g.Enter()
		}
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		if g.Rank() == 0 {
			_, err := w.FetchAndOp(1, 0, AtomicUint64, OpSum, 1)
			if !errors.Is(err, ErrTimeout) {
				return fmt.Errorf("FetchAndOp on a silent target: %v, want ErrTimeout", err)
			}
		}
		err = g.Barrier(ctx)
		if g.Rank() == 1 && gp != nil {
			gp.g.Exit()
		}
		if err != nil {
			return err
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		// The window still works. The timed-out atomic was either never
		// issued (shm answers EAGAIN until the peer has progressed once) or
		// has landed by now.
		if g.Rank() == 0 {
			old, err := w.FetchAndOp(1, 0, AtomicUint64, OpSum, 5)
			if err != nil {
				return err
			}
			if old > 1 {
				return fmt.Errorf("counter was %d before the second atomic", old)
			}
			if err := w.Put(1, 8, []byte{byte(old)}); err != nil {
				return err
			}
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if g.Rank() == 1 {
			if v, old := binary.LittleEndian.Uint64(w.Bytes()), uint64(w.Bytes()[8]); v != old+5 {
				return fmt.Errorf("counter %d, want %d", v, old+5)
			}
		}
		return w.Free(ctx)
	})
}

// TestNetAtomicsCASFallback runs the contention test with every atomic
// through the documented fallback (read, combine at the origin,
// compare-and-swap, retry).
func TestNetAtomicsCASFallback(t *testing.T) {
	requireProvider(t, "shm")
	runRanks(t, 3, func(ctx context.Context, g Group) error {
		return atomicsContention(ctx, g, 100, append(providerCase{"shm", OrderAuto}.opts(), withCASFallback())...)
	})
}

// windowKind is a kind of window a scenario runs on: direct stores, a
// libfabric provider, or a Create window (Go memory) on one.
type windowKind struct {
	name   string
	prov   string // "" for direct stores
	create bool
	opts   []Option
}

var kindDirect = windowKind{"direct", "", false, []Option{WithSharedMemory(ShmOnly)}}

// netKind is a window on libfabric provider prov, a Create window with
// create.
func netKind(prov string, create bool) windowKind {
	name := prov
	if create {
		name = "create-" + prov
	}
	return windowKind{name, prov, create, providerCase{prov, OrderAuto}.opts()}
}

// runKinds runs body on n goroutine ranks for each kind, a subtest each
// (skipped, through testenv, where the provider is missing).
func runKinds(t *testing.T, n int, kinds []windowKind, body func(ctx context.Context, g Group, k windowKind) error) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			if k.prov != "" {
				requireProvider(t, k.prov)
			}
			runRanks(t, n, func(ctx context.Context, g Group) error { return body(ctx, g, k) })
		})
	}
}

// newWindow is Allocate of size bytes, or with create a Create over Go
// memory of that size.
func newWindow(ctx context.Context, g Group, size int, create bool, opts ...Option) (*Window, error) {
	if create {
		return Create(ctx, g, make([]byte, size), opts...)
	}
	return Allocate(ctx, g, size, opts...)
}
