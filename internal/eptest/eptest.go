// Package eptest holds the set-up the tests of the layers above endpoint
// share (collectives, am): a one-rank world of the test process whose
// endpoint handles stand for ranks, the world of a launched rank, and a
// context bounded for the test.
package eptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/launchtest"
)

var single struct {
	once sync.Once
	w    *endpoint.World
	err  error
}

// Singleton returns the test process's one-rank world on libfabric's shm
// provider (for endpoint handles of its ranks: CreateEndpoints), made at
// the first call; Main closes it. It fails t inside a launched rank.
func Singleton(t testing.TB) *endpoint.World {
	t.Helper()
	if launchtest.IsWorker() {
		t.Fatal("eptest.Singleton called in a launchtest worker")
	}
	single.once.Do(func() {
		old, had := os.LookupEnv("WEFT_PMI")
		os.Setenv("WEFT_PMI", "singleton")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		single.w, single.err = endpoint.Init(ctx, endpoint.WithProvider("shm"))
		if had {
			os.Setenv("WEFT_PMI", old)
		} else {
			os.Unsetenv("WEFT_PMI")
		}
	})
	if single.err != nil {
		t.Fatalf("singleton Init: %v", single.err)
	}
	return single.w
}

// Main runs the tests, then release (nil: nothing) and closes the
// singleton world, and exits; a failing Close fails the run.
func Main(m *testing.M, release func()) {
	code := m.Run()
	if single.w != nil {
		if release != nil {
			release()
		}
		if err := single.w.Close(); err != nil && code == 0 {
			fmt.Fprintln(os.Stderr, "World.Close:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// InitWorld joins the launched job (endpoint.Init); the world is closed
// when the test ends.
func InitWorld(t *testing.T) *endpoint.World {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return w
}

// Ctx returns a context that ends after d or with the test.
func Ctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Each runs body(ctx, i) for i in 0..n-1, each in its own goroutine (a
// rank each), and returns every call's error (nil entries for success); a
// panic is an error with its stack. When one fails, the context of the
// others is cancelled, so that they stop waiting for it.
func Each(ctx context.Context, n int, body func(ctx context.Context, i int) error) []error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
				}
				if errs[i] != nil {
					cancel()
				}
			}()
			errs[i] = body(ctx, i)
		}()
	}
	wg.Wait()
	return errs
}

// First fails t with the first error of errs that is not only a
// cancellation another's failure caused (those go to the log; if there
// are only such, the first of them). ctx is the context Each was given.
func First(t *testing.T, ctx context.Context, errs []error) {
	t.Helper()
	var first error
	for i, err := range errs {
		if err == nil {
			continue
		}
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			t.Logf("rank %d: %v", i, err)
			continue
		}
		if first == nil {
			first = fmt.Errorf("rank %d: %w", i, err)
		}
	}
	if first == nil {
		for i, err := range errs {
			if err != nil {
				first = fmt.Errorf("rank %d: %w", i, err)
				break
			}
		}
	}
	if first != nil {
		t.Fatal(first)
	}
}
