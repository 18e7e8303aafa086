package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/proctest"
)

// reporter is the part of testing.TB runHandles uses.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// runHandles runs body on every handle of eps, each in a goroutine of its
// own (a private handle is driven by one goroutine), and fails t with
// their errors. As soon as one handle fails (its body returns an error or
// panics), the context every body got is cancelled, so that the others'
// waits — for a message the failed handle will never send, a collective it
// will never join — end at once instead of at ctx's deadline. The first
// failure is reported when it happens, with the handle's rank; errors that
// only say that the context was cancelled afterwards go to the log. It
// returns once every goroutine has finished, so the caller may then free
// the handles (never while a goroutine is still inside an operation).
func runHandles(t reporter, ctx context.Context, eps []*endpoint.Comm, body func(ctx context.Context, c *endpoint.Comm) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first = -1
		wg    sync.WaitGroup
	)
	errs := make([]error, len(eps))
	for i, c := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
				}
				if errs[i] == nil {
					return
				}
				mu.Lock()
				isFirst := first < 0
				if isFirst {
					first = i
				}
				mu.Unlock()
				if isFirst {
					t.Errorf("handle %d (rank %d) failed first: %v", i, c.Rank(), errs[i])
					cancel()
				}
			}()
			errs[i] = body(ctx, c)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil || i == first:
		case first >= 0 && errors.Is(err, context.Canceled):
			t.Logf("handle %d (rank %d), stopped after handle %d failed: %v", i, eps[i].Rank(), first, err)
		default:
			t.Errorf("handle %d (rank %d): %v", i, eps[i].Rank(), err)
		}
	}
}

// TestRunHandlesFailFast: handle 0 fails (and frees itself, as a goroutine
// that owns its handle does) while the others wait for it — a message it
// will never send, a barrier, an allgather. runHandles must return within
// seconds (not at its context's 60 s deadline or WEFT_ENDPOINT_TIMEOUT)
// with handle 0's error reported first and alone, and nothing may crash
// while the handles are freed.
func TestRunHandlesFailFast(t *testing.T) {
	singleton(t)
	errOnPurpose := errors.New("handle fails on purpose")
	for _, wait := range []struct {
		name string
		wait func(ctx context.Context, c *endpoint.Comm) error
	}{
		{"recv", func(ctx context.Context, c *endpoint.Comm) error {
			_, err := c.Recv(ctx, make([]byte, 8), 0, 1)
			return err
		}},
		{"barrier", func(ctx context.Context, c *endpoint.Comm) error { return c.Barrier(ctx) }},
		{"allgather", func(ctx context.Context, c *endpoint.Comm) error {
			_, err := c.Allgather(ctx, []byte{byte(c.Rank())})
			return err
		}},
	} {
		t.Run(wait.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
			if err != nil {
				t.Fatalf("Init: %v", err)
			}
			defer w.Close()
			if w.Comm().Size() != 1 {
				t.Fatalf("WEFT_PMI=singleton gave a job of %d ranks", w.Comm().Size())
			}
			eps, err := w.Comm().CreateEndpoints(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			rec := &proctest.Recorder{}
			start := time.Now()
			runHandles(rec, ctx, eps, func(ctx context.Context, c *endpoint.Comm) error {
				defer c.Free()
				// Every handle has talked to every other (shm connects on
				// first contact) before handle 0 goes.
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				if c.Rank() == 0 {
					return errOnPurpose
				}
				return wait.wait(ctx, c)
			})
			took := time.Since(start)
			t.Logf("runHandles returned after %v; reported %q; logged %q", took, rec.Errors, rec.Logs)
			if took > 10*time.Second {
				t.Errorf("runHandles took %v with a failing handle, want < 10 s", took)
			}
			if len(rec.Errors) != 1 || !strings.Contains(rec.Errors[0], "handle 0 (rank 0) failed first: "+errOnPurpose.Error()) {
				t.Errorf("reported %q, want only handle 0's error", rec.Errors)
			}
			if n := endpoint.ParkedEndpoints(w); n != 0 {
				t.Errorf("%d parked endpoints after every handle was freed", n)
			}
		})
	}
}
