package onesided

import (
	"context"
	"fmt"
	"sync"
	"testing"
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
func runRanks(t *testing.T, n int, body func(ctx context.Context, g Group) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	gs := newMemWorld(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = body(ctx, gs[i])
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
	}
}
