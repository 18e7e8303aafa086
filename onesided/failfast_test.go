package onesided

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
)

// errOnPurpose is the failing rank's error in the fail-fast tests.
var errOnPurpose = errors.New("rank fails on purpose")

// TestRunRanksFailFast: one rank's body fails right after allocating a
// window while the others wait for it in every way a test body does — a
// group barrier, a signal, a Fence, a Free, and operations that take no
// context (PutSignal into a queue that fills, FetchAndOp) aimed at the
// failed rank. runRanks must come back within seconds (not after its 60 s
// limit or WEFT_ONESIDED_TIMEOUT) with the failing rank's error reported
// first, and without crashing while the ranks free their windows (closing
// a libfabric shm endpoint under an in-process peer that still uses it
// segfaulted). Every parked libfabric object is closed afterwards.
func TestRunRanksFailFast(t *testing.T) {
	paths := []struct {
		name string
		opts []Option
		prov string
	}{
		{"direct", []Option{WithSharedMemory(ShmOnly)}, ""},
		{"shm", providerCase{"shm", OrderAuto}.opts(), "shm"},
		{"shm-delivery", providerCase{"shm", OrderDelivery}.opts(), "shm"},
		{"tcp", providerCase{"tcp;ofi_rxm", OrderAuto}.opts(), "tcp;ofi_rxm"},
	}
	waits := []struct {
		name string
		wait func(ctx context.Context, g Group, w *Window) error
	}{
		{"group-barrier", func(ctx context.Context, g Group, w *Window) error { return g.Barrier(ctx) }},
		{"wait-signal", func(ctx context.Context, g Group, w *Window) error {
			_, err := w.WaitSignal(ctx, 0, CmpGE, 1)
			return err
		}},
		{"fence", func(ctx context.Context, g Group, w *Window) error { return w.Fence(ctx) }},
		{"free", func(ctx context.Context, g Group, w *Window) error { return w.Free(ctx) }},
		{"put-signal", func(ctx context.Context, g Group, w *Window) error {
			// No context: only the failed rank's release (ErrPeerGone)
			// or the run's abort (direct stores never wait) stops it.
			for i := uint64(1); ; i++ {
				if err := w.PutSignal(0, 64, make([]byte, 512), 8, i); err != nil {
					return err
				}
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}},
		{"fetch-and-op", func(ctx context.Context, g Group, w *Window) error {
			for ctx.Err() == nil {
				if _, err := w.FetchAndOp(0, 0, AtomicUint64, OpSum, 1); err != nil {
					return err
				}
			}
			return ctx.Err()
		}},
	}
	const n, bound = 3, 10 * time.Second
	for _, p := range paths {
		for _, wt := range waits {
			t.Run(p.name+"/"+wt.name, func(t *testing.T) {
				if p.prov != "" {
					requireProvider(t, p.prov)
				}
				rec := &proctest.Recorder{}
				start := time.Now()
				runRanksReport(rec, n, testTimeout, func(ctx context.Context, g Group) (err error) {
					w, err := Allocate(ctx, g, 4096, p.opts...)
					if err != nil {
						return err
					}
					defer cleanup(ctx, &err, w.Free)
					if g.Rank() == 0 {
						return errOnPurpose
					}
					return wt.wait(ctx, g, w)
				})
				took := time.Since(start)
				t.Logf("runRanks returned after %v; reported %q; logged %q", took, rec.Errors, rec.Logs)
				if took > bound {
					t.Errorf("runRanks took %v with a failing rank, want < %v", took, bound)
				}
				if len(rec.Errors) != 1 || !strings.Contains(rec.Errors[0], "rank 0 failed first") ||
					!strings.Contains(rec.Errors[0], errOnPurpose.Error()) {
					t.Errorf("reported %q, want only rank 0's error", rec.Errors)
				}
				if k := parkedReleases(); k != 0 {
					t.Errorf("%d parked libfabric paths left after every rank freed its window", k)
				}
			})
		}
	}
}

// TestRunRanksReportsEveryFailure: a rank that fails on its own after the
// abort is reported too, a panicking rank is reported with its panic, and
// a run without failures reports nothing.
func TestRunRanksReportsEveryFailure(t *testing.T) {
	rec := &proctest.Recorder{}
	runRanksReport(rec, 3, testTimeout, func(ctx context.Context, g Group) error {
		switch g.Rank() {
		case 0:
			return errOnPurpose
		case 1:
			<-ctx.Done()
			return errors.New("rank 1's own failure")
		default:
			<-ctx.Done()
			panic("rank 2 panics")
		}
	})
	all := strings.Join(rec.Errors, "\n")
	for _, want := range []string{"rank 0 failed first: " + errOnPurpose.Error(), "rank 1: rank 1's own failure", "rank 2: panic: rank 2 panics"} {
		if !strings.Contains(all, want) {
			t.Errorf("reported %q, missing %q", rec.Errors, want)
		}
	}
	rec = &proctest.Recorder{}
	runRanksReport(rec, 2, testTimeout, func(ctx context.Context, g Group) error { return g.Barrier(ctx) })
	if len(rec.Errors) != 0 {
		t.Errorf("a run without failures reported %q", rec.Errors)
	}
}

// TestBodiesUseCleanup keeps the test bodies on the cleanup idiom: a
// collective Free or Close deferred as is cannot know that its rank is
// failing, so it waits for ranks that wait for it elsewhere, and runRanks
// only returns at its 60 s limit (examples, which run as a singleton, may
// defer as users do).
func TestBodiesUseCleanup(t *testing.T) {
	plain := regexp.MustCompile(`defer\s+[\w.\[\]]+\.(Free|Close)\(ctx\)`)
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "example_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if plain.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d: %s: defer cleanup(ctx, &err, ...) instead, with the body's named error", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
