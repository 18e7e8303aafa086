package am_test

import (
	"context"
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
	eptest.First(t, ctx, eptest.Each(ctx, len(comms), func(ctx context.Context, i int) error {
		return withEngine(ctx, comms[i], opts, body)
	}))
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
