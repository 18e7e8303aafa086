package onesided

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// memWorld is an in-process Group of goroutine "ranks": each rank maps the
// shared segment itself, so the direct-store path runs exactly as it does
// across processes.
type memWorld struct {
	n     int
	mu    sync.Mutex
	cond  *sync.Cond
	gen   int
	count int
	in    [][]byte
	out   [][]byte
}

type memGroup struct {
	w    *memWorld
	rank int
}

func newMemWorld(n int) []*memGroup {
	w := &memWorld{n: n, in: make([][]byte, n)}
	w.cond = sync.NewCond(&w.mu)
	gs := make([]*memGroup, n)
	for i := range gs {
		gs[i] = &memGroup{w: w, rank: i}
	}
	return gs
}

func (g *memGroup) Rank() int { return g.rank }
func (g *memGroup) Size() int { return g.w.n }
func (g *memGroup) Barrier(ctx context.Context) error {
	_, err := g.Allgather(ctx, nil)
	return err
}

func (g *memGroup) Allgather(ctx context.Context, data []byte) ([][]byte, error) {
	w := g.w
	w.mu.Lock()
	defer w.mu.Unlock()
	gen := w.gen
	w.in[g.rank] = append([]byte(nil), data...)
	w.count++
	if w.count == w.n {
		w.out = w.in
		w.in = make([][]byte, w.n)
		w.count = 0
		w.gen++
		w.cond.Broadcast()
		return w.out, nil
	}
	stop := context.AfterFunc(ctx, func() { w.mu.Lock(); w.cond.Broadcast(); w.mu.Unlock() })
	defer stop()
	for w.gen == gen {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("memgroup allgather: %w", err)
		}
		w.cond.Wait()
	}
	return w.out, nil
}

// runRanks runs body on n goroutine ranks and fails t with every error.
//
// The ranks share one context, which ends after testTimeout or as soon as
// one rank fails: its body returns an error, panics or stops (t.FailNow
// in a rank goroutine), or a cleanup it deferred sees it failing (cleanup
// aborts the run before it frees). The other ranks' waits then return at
// once instead of waiting for a rank that will never arrive (waits that
// take no context fail with ErrPeerGone once the failed rank has freed its
// windows). The first failure is reported when it happens (before the
// ranks tear down), with its rank; the errors the abort caused in the
// other ranks only go to the log.
func runRanks(t *testing.T, n int, body func(ctx context.Context, g Group) error) {
	t.Helper()
	runRanksReport(t, n, testTimeout, body)
}

// reporter is the part of testing.TB runRanksReport uses.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// errRankFailed is the cause of a run's cancelled context after a rank
// failed.
var errRankFailed = errors.New("another rank failed")

// rankRun is one runRanks call: its context and its first failure.
type rankRun struct {
	r      reporter // nil: abortable's, which reports nothing
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	first  int // rank of the first failure, or -1
}

// fail records that rank failed with err: the first failure is reported
// at once and cancels every rank's context.
func (run *rankRun) fail(rank int, err error) {
	run.mu.Lock()
	first := run.first < 0
	if first {
		run.first = rank
	}
	run.mu.Unlock()
	if first {
		if run.r != nil {
			run.r.Errorf("rank %d failed first: %v", rank, err)
		}
		run.cancel(fmt.Errorf("rank %d: %w", rank, errRankFailed))
	}
}

// abortable returns a context for a rank that is alone in its process
// (multi-process tests), which abort — and so cleanup on a failing body —
// ends: the failing rank then frees at once instead of waiting for ranks
// that will not come, and exits (the launcher stops the others). stop
// releases the context.
func abortable(ctx context.Context, rank int) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	run := &rankRun{cancel: cancel, first: -1}
	return context.WithValue(ctx, rankKey{}, rankCtx{run, rank}), func() { cancel(nil) }
}

type rankKey struct{}

// rankCtx is what a rank's context carries for abort.
type rankCtx struct {
	run  *rankRun
	rank int
}

// abort fails the rank whose context ctx is (see runRanks) with err; it
// does nothing for a context that runRanks did not make.
func abort(ctx context.Context, err error) {
	if rc, ok := ctx.Value(rankKey{}).(rankCtx); ok {
		rc.run.fail(rc.rank, err)
	}
}

// cleanup runs free (Window.Free, Heap.Close, WindowTransport.Close: a
// collective cleanup) when a rank's body returns; defer it with a pointer
// to the body's named error result:
//
//	defer cleanup(ctx, &err, w.Free)
//
// If the body is failing, cleanup aborts the run first (abort), so that
// free — which would wait for every rank — and the other ranks' waits end
// at once; free's error is then left out (it only says that the ranks did
// not synchronise). Otherwise free's error becomes the body's.
func cleanup(ctx context.Context, errp *error, free func(context.Context) error) {
	if *errp != nil {
		abort(ctx, *errp)
		_ = free(ctx)
		return
	}
	if err := free(ctx); err != nil {
		*errp = err
	}
}

// runRanksReport is runRanks reporting to r, with the given time limit.
func runRanksReport(r reporter, n int, limit time.Duration, body func(ctx context.Context, g Group) error) {
	r.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	run := &rankRun{r: r, cancel: cancelCause, first: -1}
	gs := newMemWorld(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx := context.WithValue(ctx, rankKey{}, rankCtx{run, i})
			returned := false
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
				} else if !returned {
					errs[i] = errors.New("the rank's goroutine stopped (t.FailNow or runtime.Goexit in a rank?)")
				}
				if errs[i] != nil {
					run.fail(i, errs[i])
				}
			}()
			errs[i] = body(rctx, gs[i])
			returned = true
		}()
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil || i == run.first:
		case run.first >= 0 && (errors.Is(err, context.Canceled) || errors.Is(err, ErrPeerGone)):
			r.Logf("rank %d, stopped after rank %d failed: %v", i, run.first, err)
		default:
			r.Errorf("rank %d: %v", i, err)
		}
	}
}
