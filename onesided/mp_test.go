package onesided

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
	"github.com/weft-hpc/weft/job"
)

// mpCase is one multi-process configuration: ranks, provider and the
// onesided environment knobs, exactly as a user would set them.
type mpCase struct {
	name     string
	n        int
	provider string
	env      []string
	fakeNode int // >0: WEFT_NODE_ID = rank / fakeNode, pretending ranks sit on several nodes
	full     bool
	// signals: a signal ordering's variant of a provider that another
	// case runs through every scenario; it runs the scenarios whose
	// signals (PutSignal, Signal, PSCW's notices, team barriers, tile
	// pipelines) the ordering changes, not the puts, gets, atomics and
	// locks that no ordering touches.
	signals bool
}

var mpCases = []mpCase{
	{name: "direct-2", n: 2, env: []string{"WEFT_ONESIDED_SHM=on"}, full: true},
	{name: "direct-4", n: 4, env: []string{"WEFT_ONESIDED_SHM=on"}, full: true},
	{name: "shm-auto-2", n: 2, provider: "shm", env: []string{"WEFT_ONESIDED_SHM=off"}, full: true},
	{name: "shm-waw-4", n: 4, provider: "shm", env: []string{"WEFT_ONESIDED_SHM=off", "WEFT_ONESIDED_ORDER=waw"}},
	{name: "shm-cqdata-4", n: 4, provider: "shm", env: []string{"WEFT_ONESIDED_SHM=off", "WEFT_ONESIDED_ORDER=cqdata"}, signals: true},
	{name: "tcp-cqdata-2", n: 2, provider: "tcp;ofi_rxm", env: []string{"WEFT_ONESIDED_SHM=off", "WEFT_ONESIDED_ORDER=cqdata"}, signals: true},
	{name: "shm-delivery-4", n: 4, provider: "shm", env: []string{"WEFT_ONESIDED_SHM=off", "WEFT_ONESIDED_ORDER=delivery"}, signals: true},
	{name: "tcp-waw-2", n: 2, provider: "tcp;ofi_rxm", env: []string{"WEFT_ONESIDED_SHM=off", "WEFT_ONESIDED_ORDER=waw"}},
	{name: "tcp-delivery-4", n: 4, provider: "tcp;ofi_rxm", env: []string{"WEFT_ONESIDED_SHM=off", "WEFT_ONESIDED_ORDER=delivery"}, signals: true},
	{name: "sockets-waw-2", n: 2, provider: "sockets", env: []string{"WEFT_ONESIDED_SHM=off", "WEFT_ONESIDED_ORDER=waw"}},
	// Two pretend nodes of two ranks: direct stores inside a node,
	// libfabric between them, in one window.
	{name: "mixed-4", n: 4, provider: "shm", fakeNode: 2},
}

// mpWorker runs body as one rank of the job over a bootstrap-backed group.
func mpWorker(t *testing.T, c mpCase, body func(ctx context.Context, g Group) error) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bs, err := job.Init(ctx)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	defer bs.Finalize()
	if bs.Size() != c.n {
		t.Fatalf("launched %d ranks, want %d", bs.Size(), c.n)
	}
	if c.fakeNode > 0 {
		os.Setenv("WEFT_NODE_ID", fmt.Sprintf("node%d", bs.Rank()/c.fakeNode))
	}
	ctx, stop := abortable(ctx, bs.Rank())
	defer stop()
	if err := body(ctx, JobGroup(bs)); err != nil {
		t.Fatalf("rank %d: %v", bs.Rank(), err)
	}
}

// TestMultiProcess runs the one-sided scenarios as launched ranks, one
// job per mpCases entry (under the race detector mixed-4 alone).
func TestMultiProcess(t *testing.T) {
	for _, c := range mpCases {
		if testenv.Race && c.name != "mixed-4" {
			// The race detector sees one rank's goroutines: these ranks
			// run one each, over onesided and endpoint code that starts
			// none (the bootstrap's are raced by its own tests). The mixed
			// case, direct stores and libfabric in one window, is enough.
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			if !launchtest.IsWorker() {
				if c.provider != "" {
					requireProvider(t, c.provider)
				}
				launchtest.Run(t, c.n, c.provider, 90*time.Second, c.env...)
				return
			}
			mpWorker(t, c, func(ctx context.Context, g Group) (err error) {
				iters, payload := 200, 64<<10
				if c.provider == "sockets" {
					iters, payload = 20, 8<<10 // sockets crawls on two oversubscribed cores
				} else if testenv.Race {
					iters = 40 // the race pass looks for unsynchronised access, not for rare orderings
				}
				heapIters := 100
				if testenv.Race {
					heapIters = 25
				}
				if c.provider == "sockets" {
					heapIters = 3
				} else if c.provider != "" {
					heapIters = 10
				}
				shapes := pipelineShapes(true)
				if !c.full && c.provider == "sockets" {
					shapes = []PipelineConfig{{N: 9, K: 4, D: 2, BytesPerIter: 512}}
				} else if !c.full {
					shapes = []PipelineConfig{{N: 17, K: 4, D: 2, BytesPerIter: 512}, {N: 9, K: 9, D: 1, BytesPerIter: 40},
						{N: 33, K: 5, D: 3, BytesPerIter: 4096}}
				}
				viaFabric := c.provider != ""
				// The scenarios in order; signals marks those a signal
				// ordering changes, when marks those of some cases only.
				steps := []struct {
					name    string
					signals bool
					when    bool
					run     func() error
				}{
					{"put-signal stress", true, true, func() error { return putSignalStress(ctx, g, iters, payload) }},
					{"atomics", false, true, func() error { return atomicsContention(ctx, g, 100) }},
					{"error paths", true, true, func() error { return windowErrors(ctx, g) }},
					{"create", false, viaFabric, func() error { return createScenario(ctx, g) }},
					{"typed", false, true, func() error { return typedScenario(ctx, g) }},
					{"heap", false, true, func() error { return heapScenario(ctx, g) }},
					{"shared", false, true, func() error { return sharedScenario(ctx, g, -1) }},
					{"typed accumulate", false, true, func() error { return accumulateTypedScenario(ctx, g) }},
					{"heap typed", false, true, func() error { return heapTypedScenario(ctx, g) }},
					{"heap atomics", false, true, func() error { return heapAtomicsScenario(ctx, g, heapIters) }},
					{"heap atomic errors", false, true, func() error { return heapAtomicErrors(ctx, g) }},
					{"heap locks", false, true, func() error { return heapLockScenario(ctx, g, 2*heapIters) }},
					{"abandoned heap lock", false, true, func() error { return heapLockAbandoned(ctx, g) }},
					{"window locks", false, true, func() error { return windowLockScenario(ctx, g, 2*heapIters, false) }},
					{"post, start, complete, wait", true, true, func() error { return pscwScenario(ctx, g, 4*heapIters, false) }},
					{"requests", false, true, func() error { return requestScenario(ctx, g, false) }},
					// dynamic windows are libfabric's alone
					{"dynamic window", true, viaFabric, func() error { return dynamicScenario(ctx, g, false, nil) }},
					// AttachShared memory: direct stores between the
					// processes of a (pretend) node, libfabric between
					// nodes.
					{"dynamic window, shared memory", true, !viaFabric || c.fakeNode > 0, func() error {
						direct := func(q int) bool { return c.fakeNode == 0 || q/c.fakeNode == g.Rank()/c.fakeNode }
						return dynamicScenario(ctx, g, true, direct, WithSharedMemory(ShmAuto))
					}},
					{"heap waits on several words", true, true, func() error { return heapWaitScenario(ctx, g) }},
					{"heap collectives", true, true, func() error { return heapCollScenario(ctx, g) }},
					{"teams", true, true, func() error { return teamScenario(ctx, g) }},
					{"pipeline", true, true, func() error { return pipelineMatrix(ctx, g, shapes) }},
				}
				for _, s := range steps {
					if !s.when || c.signals && !s.signals {
						continue
					}
					if err := s.run(); err != nil {
						return fmt.Errorf("%s: %w", s.name, err)
					}
				}
				if c.fakeNode > 0 {
					var w *Window
					if w, err = Allocate(ctx, g, 64); err != nil {
						return err
					}
					defer cleanup(ctx, &err, w.Free)
					for r := 0; r < g.Size(); r++ {
						if want := r/c.fakeNode == g.Rank()/c.fakeNode; w.Direct(r) != want {
							return fmt.Errorf("Direct(%d) = %v, want %v", r, w.Direct(r), want)
						}
					}
				}
				return nil
			})
		})
	}
}

// TestOverComm runs windows over endpoint.Comm, the group onesided is meant
// for: its Barrier and Allgather, and (granted atomics and RMA ordering)
// its libfabric domain, in which each window opens its own endpoint.
func TestOverComm(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []endpoint.Option
		env  []string
	}{
		{"own-domain", nil, []string{"WEFT_ONESIDED_SHM=off"}},
		{"comm-domain", []endpoint.Option{endpoint.WithCaps(fabric.CapAtomic), endpoint.WithOrder(fabric.OrderRMAWAW)},
			[]string{"WEFT_ONESIDED_SHM=off"}},
		{"direct", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !launchtest.IsWorker() {
				requireProvider(t, "shm")
				launchtest.Run(t, 3, "shm", 60*time.Second, c.env...)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			w, err := endpoint.Init(ctx, c.opts...)
			if err != nil {
				t.Fatalf("endpoint.Init: %v", err)
			}
			defer w.Close()
			comm := w.Comm()
			ctx, stop := abortable(ctx, comm.Rank())
			defer stop()
			win, err := Allocate(ctx, comm, 64)
			if err != nil {
				t.Fatalf("Allocate over Comm: %v", err)
			}
			if fp := netFab(win.net); fp != nil {
				if own := fp.fab != nil; own != (c.name == "own-domain") {
					t.Errorf("window opened its own domain: %v (case %s)", own, c.name)
				}
			} else if c.name != "direct" {
				t.Errorf("no libfabric path in case %s", c.name)
			}
			if err := win.Free(ctx); err != nil {
				t.Fatal(err)
			}
			if err := putSignalStress(ctx, comm, 100, 16<<10); err != nil {
				t.Fatalf("rank %d: put-signal: %v", comm.Rank(), err)
			}
			if err := atomicsContention(ctx, comm, 50); err != nil {
				t.Fatalf("rank %d: atomics: %v", comm.Rank(), err)
			}
			if err := pipelineMatrix(ctx, comm, []PipelineConfig{{N: 13, K: 4, D: 2, BytesPerIter: 1000}}); err != nil {
				t.Fatalf("rank %d: pipeline: %v", comm.Rank(), err)
			}
		})
	}
}

// TestPeerExitWindow: rank 1 goes away without freeing the window — it
// exits (os.Exit) or is killed (SIGKILL) — while rank 0 waits on it: in
// WaitSignal for a signal it will never send, or (libfabric path) in a
// FetchAndOp on its memory, which takes no context and waited
// WEFT_ONESIDED_TIMEOUT. Rank 0 must get ErrPeerGone well within its
// context's 60 s. Ranks run unsupervised (launchtest.RunMayDie). Under
// the race detector a killed rank is tested on the direct and shm paths
// only.
func TestPeerExitWindow(t *testing.T) {
	cases := []struct {
		name, provider string
		env            []string
		op             string // the call that waits for the rank that goes
	}{
		{"direct", "", []string{"WEFT_ONESIDED_SHM=on"}, "WaitSignal"},
		{"shm", "shm", []string{"WEFT_ONESIDED_SHM=off"}, "WaitSignal"},
		{"shm-fetch", "shm", []string{"WEFT_ONESIDED_SHM=off"}, "FetchAndOp"},
		{"direct-start", "", []string{"WEFT_ONESIDED_SHM=on"}, "Start"},
		{"direct-wait", "", []string{"WEFT_ONESIDED_SHM=on"}, "Wait"},
		{"shm-start", "shm", []string{"WEFT_ONESIDED_SHM=off"}, "Start"},
	}
	for _, how := range []string{"exit", "kill"} {
		for _, c := range cases {
			if testenv.Race && how == "kill" && c.name != "direct" && c.name != "shm" {
				continue // a killed peer is seen as an exited one; the race detector looks at that twice
			}
			t.Run(how+"/"+c.name, func(t *testing.T) {
				if !launchtest.IsWorker() {
					if c.provider != "" {
						requireProvider(t, c.provider)
					}
					launchtest.RunMayDie(t, 2, c.provider, 60*time.Second, []int{1}, c.env...)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				bs, err := job.Init(ctx)
				if err != nil {
					t.Fatalf("bootstrap: %v", err)
				}
				defer bs.Finalize()
				w, err := Allocate(ctx, JobGroup(bs), 64)
				if err != nil {
					t.Fatal(err)
				}
				if bs.Rank() == 1 {
					// Leave once rank 0 says it is about to block.
					if _, err := w.WaitSignal(ctx, 0, CmpGE, 1); err != nil {
						t.Fatal(err)
					}
					if how == "kill" {
						_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
						select {}
					}
					os.Exit(0)
				}
				defer func() { t.Logf("Free: %v", w.Free(ctx)) }()
				if err := w.Signal(1, 0, 1); err != nil {
					t.Fatal(err)
				}
				// Rank 1 may be gone before the flush completes.
				if err := w.Flush(ctx, 1); err != nil && !errors.Is(err, ErrPeerGone) {
					t.Fatal(err)
				}
				start := time.Now()
				op := c.op
				switch op {
				case "FetchAndOp":
					_, err = w.FetchAndOp(1, 8, AtomicUint64, OpSum, 1)
				case "Start": // rank 1 never posts
					err = w.Start(ctx, []int{1})
				case "Wait": // rank 1 never completes
					if err = w.Post(ctx, []int{1}); err == nil {
						err = w.Wait(ctx)
					}
				default:
					_, err = w.WaitSignal(ctx, 8, CmpGE, 1)
				}
				took := time.Since(start)
				if !errors.Is(err, ErrPeerGone) {
					t.Fatalf("%s on a rank that went away: %v after %v, want ErrPeerGone", op, err, took)
				}
				if took > 20*time.Second {
					t.Fatalf("%s took %v to see that rank 1 went away", op, took)
				}
				t.Logf("%s returned after %v: %v", op, took, err)
			})
		}
	}
}
