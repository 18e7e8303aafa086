package collectives_test

// Multi-process tests: each re-executes the test binary as N ranks
// through launchtest (weft's local launcher); the worker branch is the
// rank's body. "native" is weft's node transport (rings and single-copy
// between the processes of this node); "tcp" is libfabric's tcp;ofi_rxm
// with every peer on libfabric (WEFT_NODE_TRANSPORT=fabric).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
)

var providers = []string{"native", "tcp;ofi_rxm"}

func provName(p string) string {
	if p == "tcp;ofi_rxm" {
		return "tcp"
	}
	return p
}

// launchMayDie is launch on the node transport for a test whose ranks
// dies may exit on purpose (launchtest.RunMayDie: unsupervised ranks).
func launchMayDie(t *testing.T, n int, dies ...int) bool {
	t.Helper()
	if launchtest.IsWorker() {
		return false
	}
	launchtest.RunMayDie(t, n, "shm", 60*time.Second, dies, endpoint.EnvNodeTransport+"=native")
	return true
}

// worldColl joins the job (initWorld) and makes a handle over the world
// communicator, with a 50 s context for the test's calls.
func worldColl(t *testing.T) (*endpoint.World, context.Context, *C.Coll) {
	t.Helper()
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 50*time.Second)
	c, err := C.New(ctx, w.Comm())
	if err != nil {
		t.Fatal(err)
	}
	return w, ctx, c
}

// TestBatteryProcs: the battery over the world communicator of 2 and 4
// processes, on the node transport and on tcp; the 1 MiB cases on the
// node transport.
func TestBatteryProcs(t *testing.T) {
	for _, p := range providers {
		for _, np := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/n%d", provName(p), np), func(t *testing.T) {
				big := "WEFT_TEST_BIG=0"
				if p == "native" && !testing.Short() {
					big = "WEFT_TEST_BIG=1"
				}
				if launchtest.RunOn(t, np, p, 120*time.Second, big) {
					return
				}
				w := eptest.InitWorld(t)
				ctx := eptest.Ctx(t, 100*time.Second)
				c, err := C.New(ctx, w.Comm())
				if err != nil {
					t.Fatal(err)
				}
				if err := battery(ctx, c, os.Getenv("WEFT_TEST_BIG") == "1"); err != nil {
					t.Fatal(err)
				}
				if err := c.Free(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestBatteryProcsEndpoints: 2 processes × 2 endpoint handles each (a
// communicator of 4 ranks, two per process), and the communicators Split
// makes of it (even and odd ranks: one handle of each process each).
func TestBatteryProcsEndpoints(t *testing.T) {
	if launchtest.RunOn(t, 2, "native", 120*time.Second) {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 100*time.Second)
	eps := endpointsOf(t, ctx, w.Comm(), 2)
	runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		if c.Size() != 4 {
			return fmt.Errorf("size %d, want 4", c.Size())
		}
		if err := battery(ctx, c, false); err != nil {
			return err
		}
		sub, err := c.Comm().Split(ctx, c.Rank()%2, 0)
		if err != nil {
			return err
		}
		defer sub.Free()
		sc, err := C.New(ctx, sub)
		if err != nil {
			return err
		}
		if err := battery(ctx, sc, false); err != nil {
			return fmt.Errorf("split communicator: %w", err)
		}
		return sc.Free()
	})
}

// TestDeterministicProcs: deterministic mode across processes.
func TestDeterministicProcs(t *testing.T) {
	testenv.Short(t, "deterministic mode over 3 processes")
	if launchtest.RunOn(t, 3, "native", 60*time.Second) {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 50*time.Second)
	c, err := C.New(ctx, w.Comm(), C.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := detBattery(ctx, c, []int{1, 37, 1000}); err != nil {
		t.Fatal(err)
	}
	if err := c.Free(); err != nil {
		t.Fatal(err)
	}
}

// TestPeerExit: a rank whose process exits while the others wait for it
// in a collective makes their calls fail with ErrPeerGone (or with the
// abort notice of a rank that saw it first) within seconds, not at their
// contexts' deadline: a blocking Allreduce, and the Waits of a
// nonblocking Iallreduce and an Ibarrier started before it; through the
// node level (the default) and flat (WithHierarchy(HierOff): the
// collectives' own waits look for exited peers every 100 ms). The ranks
// run unsupervised (launchtest.RunMayDie).
func TestPeerExit(t *testing.T) {
	testenv.Short(t, "a process leaving mid-collective")
	for _, tc := range []struct {
		nb, flat bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		nb := tc.nb
		t.Run(fmt.Sprintf("nonblocking=%v,flat=%v", tc.nb, tc.flat), func(t *testing.T) {
			if launchMayDie(t, 3, 2) {
				return
			}
			w, ctx, c := worldColl(t)
			if tc.flat {
				c.Free()
				var err error
				if c, err = C.New(ctx, w.Comm(), C.WithHierarchy(C.HierOff)); err != nil {
					t.Fatal(err)
				}
			}
			if err := peerExitCalls(t, ctx, c, c.Rank() == 2, nb); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestProfile: with the world counting (WEFT_STATS), the stats file each
// process writes at Close counts its collectives — blocking calls with
// their time, nonblocking ones started — beside its point-to-point
// traffic; 3 processes, flat and through the node level.
func TestProfile(t *testing.T) {
	dir := t.TempDir()
	if launchtest.RunOn(t, 3, "native", 60*time.Second, "WEFT_STATS="+dir) {
		for r := range 3 {
			raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("weft-stats.%d.json", r)))
			if err != nil {
				t.Fatal(err)
			}
			var f struct {
				Sent   struct{ Messages uint64 }
				Layers struct {
					Collectives map[string]struct {
						Calls, NS, Started uint64
						WaitNS             uint64 `json:"wait_ns"`
					}
				}
			}
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			cs := f.Layers.Collectives
			// per handle: 5+5 Allreduce, 2 Bcast, 1 Barrier, 1 Iallreduce;
			// two handles (hierarchical and flat)
			for name, want := range map[string][2]uint64{"Allreduce": {20, 2}, "Bcast": {4, 0}, "Barrier": {2, 0}} {
				c := cs[name]
				if c.Calls != want[0] || c.Started != want[1] || c.NS == 0 {
					t.Errorf("rank %d: %s %+v, want %d calls with their time, %d started (file:\n%s)", r, name, c, want[0], want[1], raw)
				}
			}
			// the Iallreduces' Waits took time; nothing else was waited for
			if cs["Allreduce"].WaitNS == 0 || cs["Bcast"].WaitNS != 0 || cs["Barrier"].WaitNS != 0 {
				t.Errorf("rank %d: time in Waits: Allreduce %d ns, Bcast %d, Barrier %d (file:\n%s)", r, cs["Allreduce"].WaitNS, cs["Bcast"].WaitNS, cs["Barrier"].WaitNS, raw)
			}
			if f.Sent.Messages == 0 {
				t.Errorf("rank %d: no point-to-point messages counted (the flat handle's collectives send some)", r)
			}
		}
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 50*time.Second)
	for _, hier := range []C.Hierarchy{C.HierAuto, C.HierOff} {
		c, err := C.New(ctx, w.Comm(), C.WithHierarchy(hier))
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float64, 4)
		for range 5 {
			if err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]()); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if err := C.Bcast(ctx, c, x, 0); err != nil {
				t.Fatal(err)
			}
		}
		q, err := C.Iallreduce(c, nil, x, C.Max[float64]())
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := C.Barrier(ctx, c); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]()); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Free(); err != nil {
			t.Fatal(err)
		}
	}
}

// peerExitCalls: with exits, this rank's process leaves once the ranks
// have met in a Barrier; the others wait for it in an Allreduce, or (nb)
// in the Waits of an Ibarrier and an Iallreduce, which must fail with
// ErrPeerGone (or the abort notice of a rank that saw it first) within
// seconds.
func peerExitCalls(t *testing.T, ctx context.Context, c *C.Coll, exits, nb bool) error {
	if err := C.Barrier(ctx, c); err != nil {
		return err
	}
	if exits {
		time.Sleep(50 * time.Millisecond) // the others are waiting
		os.Exit(0)
	}
	start := time.Now()
	var errs []error
	if !nb {
		errs = append(errs, C.Allreduce(ctx, c, nil, make([]float64, 4), C.Sum[float64]()))
	} else {
		q1, err := C.Ibarrier(c)
		if err != nil {
			return err
		}
		q2, err := C.Iallreduce(c, nil, make([]float64, 4), C.Sum[float64]())
		if err != nil {
			return err
		}
		errs = append(errs, q2.Wait(ctx), q1.Wait(ctx))
	}
	took := time.Since(start)
	t.Logf("rank %d: %v after %v", c.Rank(), errs, took)
	for _, err := range errs {
		if !errors.Is(err, C.ErrPeerGone) && !errors.Is(err, C.ErrCanceled) {
			return fmt.Errorf("rank %d: with a process gone: %v, want ErrPeerGone", c.Rank(), err)
		}
	}
	if took > 10*time.Second {
		return fmt.Errorf("rank %d: with a process gone: took %v", c.Rank(), took)
	}
	return nil
}

// TestHybridLengthMismatch: nonblocking Bcasts and Reduces over 2
// processes of 2 handles whose lengths differ between ranks and straddle
// the size from which they combine through process memory (some ranks
// take that path, the others the flat one) fail on every rank within
// quick instead of waiting out their context (or, where its part of the
// call completed, at the next call): one member of a process short, and a
// whole process short with the root among it (under the race detector
// three of the six cases).
func TestHybridLengthMismatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		short func(proc, h int) bool // which handles pass 64 KiB instead of 256
		root  int
	}{
		{"member", func(p, h int) bool { return p == 1 && h == 1 }, 0},
		{"member-root", func(p, h int) bool { return p == 1 && h == 1 }, 3},
		{"process-root", func(p, h int) bool { return p == 1 }, 2},
	} {
		for _, call := range []string{"bcast", "reduce"} {
			if testenv.Race && (tc.name == "member") != (call == "bcast") {
				continue // the race detector: a member's note and a flat message, once each
			}
			t.Run(tc.name+"-"+call, func(t *testing.T) {
				if launchtest.RunOn(t, 2, "native", 60*time.Second) {
					return
				}
				w := eptest.InitWorld(t)
				ctx := eptest.Ctx(t, 30*time.Second)
				eps, err := w.Comm().CreateEndpoints(ctx, 2)
				if err != nil {
					t.Fatal(err)
				}
				p := w.Comm().Rank()
				errs, took := each(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
					if !c.Hierarchical(C.CollBcast) {
						return errors.New("not hierarchical")
					}
					n := 256 << 10
					if tc.short(p, c.Rank()%2) {
						n = 64 << 10
					}
					var r *C.Request
					var err error
					if call == "bcast" {
						r, err = C.Ibcast(c, make([]byte, n), tc.root)
					} else {
						r, err = C.Ireduce(c, make([]int32, n/4), make([]int32, n/4), C.Sum[int32](), tc.root)
					}
					if err == nil {
						err = r.Wait(ctx)
					}
					if err == nil {
						// A rank whose part completed (a root, a flat
						// receiver) learns of the mismatch at its next call.
						err = C.Barrier(ctx, c)
					}
					return err
				})
				for i, err := range errs {
					switch {
					case err == nil:
						t.Errorf("process %d, handle %d: no error", p, i)
					case errors.Is(err, context.DeadlineExceeded):
						t.Errorf("process %d, handle %d hung: %v", p, i, err)
					default:
						t.Logf("process %d, handle %d: %v", p, i, err)
					}
					if took[i] > quick {
						t.Errorf("process %d, handle %d took %v", p, i, took[i])
					}
				}
			})
		}
	}
}
