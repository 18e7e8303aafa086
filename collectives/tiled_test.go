package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/onesided"
)

// tiledValue is what rank src computes in iteration it for rank dst,
// element e, in call r.
func tiledValue(src, dst, it, e, r int) float64 {
	return float64(src*1_000_000+dst*10_000+it*10+e) + 0.5*float64(r)
}

// tiledCheck runs the overlapped all-to-all over c for every shape in
// shapes (two calls each, the second with other values) and compares its
// result with the plain Alltoall of the same data, and Run's consumer
// with the tile order.
func tiledCheck(ctx context.Context, c *C.Coll, iters, count int, shapes [][2]int, opts ...C.TiledOption) (err error) {
	P, me := c.Size(), c.Rank()
	a, err := C.NewTiledAlltoall[float64](ctx, c, iters, count, opts...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, a.Free(ctx)) }()
	block := iters * count
	for _, sh := range shapes {
		if err := a.SetTiles(ctx, sh[0], sh[1]); err != nil {
			return err
		}
		for r := range 2 {
			send := make([]float64, P*block)
			for q := range P {
				for it := range iters {
					for e := range count {
						send[q*block+it*count+e] = tiledValue(me, q, it, e, r)
					}
				}
			}
			want := make([]float64, P*block)
			if err := C.Alltoall(ctx, c, send, want); err != nil {
				return err
			}
			calls := 0
			compute := func(t C.Tile, out [][]float64) error {
				if t.Index != calls || t.First != calls*min(sh[0], iters) {
					return fmt.Errorf("compute of tile %+v, want tile %d", t, calls)
				}
				calls++
				for q, o := range out {
					if len(o) != t.Count*count {
						return fmt.Errorf("out[%d] holds %d elements for %d iterations of %d", q, len(o), t.Count, count)
					}
					copy(o, send[q*block+t.First*count:])
				}
				return nil
			}
			got := make([]float64, P*block)
			if err := a.Alltoall(ctx, compute, got); err != nil {
				return fmt.Errorf("shape %v call %d: %w", sh, r, err)
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("shape %v call %d: overlapped result differs from Alltoall's", sh, r)
			}
			next := 0
			consume := func(t C.Tile, in [][]float64) error {
				if t.Index != next {
					return fmt.Errorf("consumed tile %d, want %d", t.Index, next)
				}
				next++
				for q, b := range in {
					if !slices.Equal(b, want[q*block+t.First*count:q*block+(t.First+t.Count)*count]) {
						return fmt.Errorf("tile %d from rank %d differs", t.Index, q)
					}
				}
				return nil
			}
			calls = 0
			if err := a.Run(ctx, compute, consume); err != nil {
				return err
			}
			if k, _ := a.Tiles(); next != (iters+k-1)/k {
				return fmt.Errorf("consumed %d tiles of %d", next, (iters+k-1)/k)
			}
		}
	}
	return nil
}

// TestTiledAlltoall: the overlapped all-to-all over endpoint handles of
// one process (direct stores between them), 1 to 5 ranks, against the
// plain Alltoall, for tiles that divide the loop or not, depths 1 to 3
// and a tile as large as the loop.
func TestTiledAlltoall(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := eptest.Ctx(t, 60*time.Second)
			runHandles(t, ctx, handles(t, n), nil, func(ctx context.Context, c *C.Coll) error {
				return tiledCheck(ctx, c, 13, 3, [][2]int{{1, 1}, {4, 2}, {5, 3}, {13, 2}, {20, 1}})
			})
		})
	}
}

// TestTiledTune: Tune over 3 handles gives every rank the same shape,
// within the candidates, and the handle runs correctly with it; an
// exhaustive search times every candidate.
func TestTiledTune(t *testing.T) {
	ctx := eptest.Ctx(t, 60*time.Second)
	runHandles(t, ctx, handles(t, 3), nil, func(ctx context.Context, c *C.Coll) (err error) {
		const iters, count = 32, 64
		a, err := C.NewTiledAlltoall[float64](ctx, c, iters, count)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, a.Free(ctx)) }()
		compute := func(t C.Tile, out [][]float64) error {
			for q, o := range out {
				for i := range o {
					o[i] = tiledValue(c.Rank(), q, t.First+i/count, i%count, 0)
				}
			}
			return nil
		}
		consume := func(C.Tile, [][]float64) error { return nil }
		for _, exh := range []bool{false, true} {
			res, err := a.Tune(ctx, onesided.TuneConfig{Ks: []int{2, 4, 8, 16, 64}, Ds: []int{1, 2}, Exhaustive: exh}, compute, consume)
			if err != nil {
				return err
			}
			k, d := a.Tiles()
			if k != res.Config.K || d != res.Config.D || !slices.Contains([]int{2, 4, 8, 16}, k) || d < 1 || d > 2 {
				return fmt.Errorf("exhaustive=%v: tuned to K=%d D=%d (result %+v)", exh, k, d, res.Config)
			}
			if exh && len(res.Trials) != 8 {
				return fmt.Errorf("exhaustive search timed %d shapes, want 8", len(res.Trials))
			}
			all := make([]int64, 2*c.Size())
			if err := C.Allgather(ctx, c, []int64{int64(k), int64(d)}, all); err != nil {
				return err
			}
			for r := range c.Size() {
				if all[2*r] != all[0] || all[2*r+1] != all[1] {
					return fmt.Errorf("rank %d chose %v, rank 0 %v", r, all[2*r:2*r+2], all[:2])
				}
			}
		}
		got := make([]float64, c.Size()*iters*count)
		if err := a.Alltoall(ctx, compute, got); err != nil {
			return err
		}
		for q := range c.Size() {
			for i := range iters * count {
				if w := tiledValue(q, c.Rank(), i/count, i%count, 0); got[q*iters*count+i] != w {
					return fmt.Errorf("element %d from rank %d: %v, want %v", i, q, got[q*iters*count+i], w)
				}
			}
		}
		return nil
	})
}

// TestTiledErrors: bad arguments are errors wrapping ErrInvalid, a
// failing compute function ends the call and the handle, and a freed
// handle refuses calls.
func TestTiledErrors(t *testing.T) {
	ctx := eptest.Ctx(t, 30*time.Second)
	runHandles(t, ctx, handles(t, 2), nil, func(ctx context.Context, c *C.Coll) error {
		if _, err := C.NewTiledAlltoall[float64](ctx, nil, 4, 4); !errors.Is(err, C.ErrInvalid) {
			return fmt.Errorf("nil handle: %v", err)
		}
		for _, bad := range [][2]int{{0, 4}, {4, 0}, {-1, 1}} {
			if _, err := C.NewTiledAlltoall[float64](ctx, c, bad[0], bad[1]); !errors.Is(err, C.ErrInvalid) {
				return fmt.Errorf("iters, count %v: %v", bad, err)
			}
		}
		if _, err := C.NewTiledAlltoall[*int](ctx, c, 4, 4); !errors.Is(err, C.ErrInvalid) {
			return fmt.Errorf("pointer elements: %v", err)
		}
		if _, err := C.NewTiledAlltoall[float64](ctx, c, 4, 4, C.WithTiles(0, 1)); !errors.Is(err, C.ErrInvalid) {
			return fmt.Errorf("WithTiles(0, 1): %v", err)
		}
		a, err := C.NewTiledAlltoall[int32](ctx, c, 8, 2, C.WithTiles(2, 1), C.WithTileLimits(4, 2))
		if err != nil {
			return err
		}
		if err := a.SetTiles(ctx, 8, 1); !errors.Is(err, C.ErrInvalid) {
			return fmt.Errorf("SetTiles beyond the limit: %v", err)
		}
		if err := a.Alltoall(ctx, func(C.Tile, [][]int32) error { return nil }, make([]int32, 5)); !errors.Is(err, C.ErrInvalid) {
			return fmt.Errorf("short recv: %v", err)
		}
		if err := a.Run(ctx, nil, nil); !errors.Is(err, C.ErrInvalid) {
			return fmt.Errorf("nil functions: %v", err)
		}
		// Every rank's compute fails on its first tile, before any wait:
		// the call returns that error and the handle is closed.
		boom := errors.New("boom")
		err = a.Run(ctx, func(t C.Tile, out [][]int32) error { return boom }, func(C.Tile, [][]int32) error { return nil })
		if !errors.Is(err, boom) {
			return fmt.Errorf("failing compute: %v", err)
		}
		if err := a.Run(ctx, func(C.Tile, [][]int32) error { return nil }, func(C.Tile, [][]int32) error { return nil }); !errors.Is(err, C.ErrClosed) {
			return fmt.Errorf("call after a failure: %v", err)
		}
		if err := a.Free(ctx); err != nil {
			return err
		}
		if err := a.SetTiles(ctx, 1, 1); !errors.Is(err, C.ErrClosed) {
			return fmt.Errorf("after Free: %v", err)
		}
		return nil
	})
}
