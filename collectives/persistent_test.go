package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// TestPersistentHandles: every persistent collective over 1, 3 and 4
// handles of one process, started three times with new data each time.
func TestPersistentHandles(t *testing.T) {
	for _, n := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, n), nil, persistentScenario)
		})
	}
}

// TestPersistentProcs: the same over 3 processes on the node transport
// and 2 over tcp.
func TestPersistentProcs(t *testing.T) {
	for _, tc := range []struct {
		prov string
		np   int
	}{{"native", 3}, {"tcp;ofi_rxm", 2}} {
		t.Run(fmt.Sprintf("%s/n%d", provName(tc.prov), tc.np), func(t *testing.T) {
			if launchtest.RunOn(t, tc.np, tc.prov, 90*time.Second) {
				return
			}
			_, ctx, c := worldColl(t)
			defer c.Free()
			if err := persistentScenario(ctx, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// persistentScenario binds each collective once and starts it three
// times, the data rewritten before each start, each result checked; two
// are in flight at once and waited for in the other order; then the
// misuses.
func persistentScenario(ctx context.Context, c *C.Coll) error {
	me, p := c.Rank(), c.Size()
	const n = 5
	send, recv := make([]int64, n), make([]int64, n)
	all, gathered := make([]int64, n*p), make([]int64, n*p)
	bbuf := make([]int64, n)
	inits := []struct {
		name  string
		make  func() (*C.Persistent, error)
		fill  func(it int)
		check func(it int) error
	}{
		{"Allreduce", func() (*C.Persistent, error) { return C.AllreduceInit(c, send, recv, C.Sum[int64]()) },
			func(it int) { fillFor(send, me, it) },
			func(it int) error {
				for i := range recv {
					want := int64(0)
					for r := range p {
						want += pval(r, it, i)
					}
					if recv[i] != want {
						return fmt.Errorf("element %d = %d, want %d", i, recv[i], want)
					}
				}
				return nil
			}},
		{"Bcast", func() (*C.Persistent, error) { return C.BcastInit(c, bbuf, p-1) },
			func(it int) {
				if me == p-1 {
					fillFor(bbuf, me, it)
				}
			},
			func(it int) error { return wantFrom(bbuf, p-1, it) }},
		{"Reduce", func() (*C.Persistent, error) { return C.ReduceInit(c, send, recv, C.Max[int64](), 0) },
			func(it int) { fillFor(send, me, it); clear(recv) },
			func(it int) error {
				if me != 0 {
					return nil
				}
				return wantFrom(recv, p-1, it) // pval grows with the rank
			}},
		{"Allgather", func() (*C.Persistent, error) { return C.AllgatherInit(c, send, gathered) },
			func(it int) { fillFor(send, me, it) },
			func(it int) error {
				for r := range p {
					if err := wantFrom(gathered[r*n:(r+1)*n], r, it); err != nil {
						return fmt.Errorf("block %d: %w", r, err)
					}
				}
				return nil
			}},
		{"Alltoall", func() (*C.Persistent, error) { return C.AlltoallInit(c, all, gathered) },
			func(it int) {
				for r := range p {
					fillFor(all[r*n:(r+1)*n], me*100+r, it)
				}
			},
			func(it int) error {
				for r := range p {
					if err := wantFrom(gathered[r*n:(r+1)*n], r*100+me, it); err != nil {
						return fmt.Errorf("block %d: %w", r, err)
					}
				}
				return nil
			}},
		{"Gather", func() (*C.Persistent, error) { return C.GatherInit(c, send, gathered, 0) },
			func(it int) { fillFor(send, me, it) },
			func(it int) error {
				for r := 0; me == 0 && r < p; r++ {
					if err := wantFrom(gathered[r*n:(r+1)*n], r, it); err != nil {
						return fmt.Errorf("block %d: %w", r, err)
					}
				}
				return nil
			}},
		{"Scatter", func() (*C.Persistent, error) { return C.ScatterInit(c, all, recv, 0) },
			func(it int) {
				for r := range p {
					fillFor(all[r*n:(r+1)*n], r, it)
				}
			},
			func(it int) error { return wantFrom(recv, me, it) }},
		{"Scan", func() (*C.Persistent, error) { return C.ScanInit(c, send, recv, C.Sum[int64]()) },
			func(it int) { fillFor(send, me, it) },
			func(it int) error {
				for i := range recv {
					want := int64(0)
					for r := 0; r <= me; r++ {
						want += pval(r, it, i)
					}
					if recv[i] != want {
						return fmt.Errorf("element %d = %d, want %d", i, recv[i], want)
					}
				}
				return nil
			}},
		{"ReduceScatterBlock", func() (*C.Persistent, error) { return C.ReduceScatterBlockInit(c, all, recv, C.Sum[int64]()) },
			func(it int) {
				for r := range p {
					fillFor(all[r*n:(r+1)*n], me, it+r)
				}
			},
			func(it int) error {
				for i := range recv {
					want := int64(0)
					for r := range p {
						want += pval(r, it+me, i)
					}
					if recv[i] != want {
						return fmt.Errorf("element %d = %d, want %d", i, recv[i], want)
					}
				}
				return nil
			}},
		{"Barrier", func() (*C.Persistent, error) { return C.BarrierInit(c) }, func(int) {}, func(int) error { return nil }},
	}
	for _, in := range inits {
		q, err := in.make()
		if err != nil {
			return fmt.Errorf("%sInit: %w", in.name, err)
		}
		for it := range 3 {
			in.fill(it)
			if err := q.Start(); err != nil {
				return fmt.Errorf("%s start %d: %w", in.name, it, err)
			}
			if !q.Active() {
				return fmt.Errorf("%s start %d: not active", in.name, it)
			}
			if it == 1 {
				for done := false; !done; {
					if done, err = q.Test(); err != nil {
						return fmt.Errorf("%s start %d: %w", in.name, it, err)
					}
				}
			} else if err := q.Wait(ctx); err != nil {
				return fmt.Errorf("%s start %d: %w", in.name, it, err)
			}
			if err := in.check(it); err != nil {
				return fmt.Errorf("%s start %d: %w", in.name, it, err)
			}
		}
		if err := q.Free(); err != nil {
			return err
		}
	}

	// Two in flight, completed in the other order; misuses.
	ar, err := C.AllreduceInit(c, send, recv, C.Sum[int64]())
	if err != nil {
		return err
	}
	bc, err := C.BcastInit(c, bbuf, 0)
	if err != nil {
		return err
	}
	fillFor(send, me, 7)
	if me == 0 {
		fillFor(bbuf, 0, 8)
	}
	if err := errors.Join(ar.Start(), bc.Start()); err != nil {
		return err
	}
	if err := ar.Start(); !errors.Is(err, C.ErrInvalid) {
		return fmt.Errorf("Start of an active persistent collective: %v, want ErrInvalid", err)
	}
	if err := ar.Free(); !errors.Is(err, C.ErrInvalid) {
		return fmt.Errorf("Free of an active persistent collective: %v, want ErrInvalid", err)
	}
	if err := errors.Join(bc.Wait(ctx), ar.Wait(ctx)); err != nil {
		return err
	}
	if err := wantFrom(bbuf, 0, 8); err != nil {
		return fmt.Errorf("Bcast in flight with an Allreduce: %w", err)
	}
	if err := ar.Wait(ctx); err != nil {
		return fmt.Errorf("Wait of an inactive persistent collective: %v", err)
	}
	if done, err := ar.Test(); !done || err != nil {
		return fmt.Errorf("Test of an inactive persistent collective: %v, %v", done, err)
	}
	if err := errors.Join(ar.Free(), bc.Free(), ar.Free()); err != nil {
		return err
	}
	if err := ar.Start(); !errors.Is(err, C.ErrInvalid) {
		return fmt.Errorf("Start after Free: %v, want ErrInvalid", err)
	}
	var nilColl *C.Coll
	if _, err := C.BarrierInit(nilColl); !errors.Is(err, C.ErrInvalid) {
		return fmt.Errorf("BarrierInit on a nil handle: %v, want ErrInvalid", err)
	}
	return C.Barrier(ctx, c)
}

// pval is the value rank r contributes at element i in start it.
func pval(r, it, i int) int64 { return int64(r*1000 + it*100 + i) }

func fillFor(b []int64, r, it int) {
	for i := range b {
		b[i] = pval(r, it, i)
	}
}

func wantFrom(b []int64, r, it int) error {
	for i := range b {
		if want := pval(r, it, i); b[i] != want {
			return fmt.Errorf("element %d = %d, want %d (rank %d's)", i, b[i], want, r)
		}
	}
	return nil
}
