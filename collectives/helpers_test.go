package collectives_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
)

// The tests run collectives over two kinds of ranks: the endpoint handles
// of one process (CreateEndpoints, one goroutine per handle: cheap, so
// they cover communicator sizes 1 to 8), and real processes started by
// launchtest (mp_test.go).

// handle sets of the singleton world, by size, kept for the whole test
// binary (eptest.Main frees them).
var single struct {
	mu  sync.Mutex
	eps map[int][]*endpoint.Comm
}

func TestMain(m *testing.M) {
	eptest.Main(m, func() {
		for _, eps := range single.eps {
			for _, e := range eps {
				e.Free()
			}
		}
	})
}

// handles returns n endpoint handles of a one-rank (singleton) world on
// this process, made once per n and kept for the whole test binary.
func handles(t testing.TB, n int) []*endpoint.Comm {
	t.Helper()
	w := eptest.Singleton(t)
	single.mu.Lock()
	defer single.mu.Unlock()
	if eps, ok := single.eps[n]; ok {
		return eps
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eps, err := w.Comm().CreateEndpoints(ctx, n)
	if err != nil {
		t.Fatalf("CreateEndpoints(%d): %v", n, err)
	}
	if single.eps == nil {
		single.eps = map[int][]*endpoint.Comm{}
	}
	single.eps[n] = eps
	return eps
}

// onHandles runs body on every handle of eps, each in its own goroutine
// with its own collectives handle (made with opts, freed afterwards), and
// returns every handle's error (nil entries for success). When one body
// fails, the context of the others is cancelled, so that they stop
// waiting for it.
func onHandles(ctx context.Context, eps []*endpoint.Comm, opts []collectives.Option, body func(ctx context.Context, c *collectives.Coll) error) []error {
	return eptest.Each(ctx, len(eps), func(ctx context.Context, i int) error {
		c, err := collectives.New(ctx, eps[i], opts...)
		if err != nil {
			return err
		}
		err = body(ctx, c)
		if ferr := c.Free(); ferr != nil && err == nil {
			err = ferr
		}
		return err
	})
}

// runHandles is onHandles failing t with the first error of the handle
// that failed first (errors saying only that the context was cancelled
// after it go to the log).
func runHandles(t *testing.T, ctx context.Context, eps []*endpoint.Comm, opts []collectives.Option, body func(ctx context.Context, c *collectives.Coll) error) {
	t.Helper()
	eptest.First(t, ctx, onHandles(ctx, eps, opts, body))
}

// endpointsOf makes n endpoint handles of comm (CreateEndpoints, with
// opts), freed when the test ends.
func endpointsOf(t *testing.T, ctx context.Context, comm *endpoint.Comm, n int, opts ...endpoint.Option) []*endpoint.Comm {
	t.Helper()
	eps, err := comm.CreateEndpoints(ctx, n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, e := range eps {
			e.Free()
		}
	})
	return eps
}
