package am_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/am"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
)

// The tests run engines over two kinds of ranks: the endpoint handles of
// one process (CreateEndpoints, a goroutine per handle), and processes
// started by launchtest on weft's node transport ("native") or on
// libfabric's tcp;ofi_rxm with every peer on libfabric.

func TestMain(m *testing.M) { eptest.Main(m, nil) }

// handles returns n endpoint handles of the test process's one-rank
// world, freed when the test ends.
func handles(t testing.TB, n int) []*endpoint.Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eps, err := eptest.Singleton(t).Comm().CreateEndpoints(ctx, n)
	if err != nil {
		t.Fatalf("CreateEndpoints(%d): %v", n, err)
	}
	t.Cleanup(func() {
		for _, e := range eps {
			e.Free()
		}
	})
	return eps
}

// onEngines opens an engine (with opts) on every communicator of comms,
// each in its own goroutine, runs body with it and closes it; the first
// failure cancels the others' context and fails t.
func onEngines(t *testing.T, ctx context.Context, comms []*endpoint.Comm, opts []am.Option, body func(ctx context.Context, e *am.Engine) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
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
			errs[i] = withEngine(ctx, c, opts, body)
		}()
	}
	wg.Wait()
	var first error
	for i, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled)) {
			first = fmt.Errorf("rank %d: %w", i, err)
		}
	}
	if first != nil {
		t.Fatal(first)
	}
}

// withEngine opens an engine over c, runs body and closes the engine.
func withEngine(ctx context.Context, c *endpoint.Comm, opts []am.Option, body func(ctx context.Context, e *am.Engine) error) error {
	e, err := am.Open(ctx, c, opts...)
	if err != nil {
		return err
	}
	err = body(ctx, e)
	if cerr := e.Close(ctx); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

var providers = []string{"native", "tcp;ofi_rxm"}

func provName(p string) string {
	if p == "tcp;ofi_rxm" {
		return "tcp"
	}
	return p
}
