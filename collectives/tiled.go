package collectives

import (
	"context"
	"errors"
	"fmt"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/memcopy"
	"github.com/weft-hpc/weft/onesided"
)

// Tile is one tile of a TiledAlltoall's loop: iterations [First,
// First+Count) of it, the Index-th tile of the call.
type Tile = onesided.Tile

// TileCompute computes a tile of the loop and writes what each rank p
// must receive from it into out[p] (Count×count elements, iteration
// after iteration; out[Rank()] is this rank's own share). The buffers
// are the transfer's: what is written there is sent as it is.
type TileCompute[T any] func(t Tile, out [][]T) error

// TileConsume takes an arrived tile: in[p] holds what rank p computed for
// this rank in its tile t (Count×count elements). The buffers are reused
// once it returns.
type TileConsume[T any] func(t Tile, in [][]T) error

// TiledAlltoall is an all-to-all overlapped with the computation that
// produces it, the tiling transformation of Danalis et al. (SC'05): a loop
// of iters iterations, each producing count elements for every rank, runs
// in tiles of K iterations; after computing a tile a rank puts its blocks
// straight into the receivers' memory with a signal (onesided's
// flag-polled puts: direct stores between ranks of one node, libfabric RMA
// otherwise) and goes on computing, and a tile computed D tiles earlier is
// awaited and handed to the consumer. Its result equals that of Alltoall
// over the buffers the whole loop would fill: block i of the receive side
// is rank i's iters×count elements for this rank.
//
// NewTiledAlltoall sets up its window once; every call reuses it, until
// Free. Like a Coll, a handle is driven by one goroutine at a time, and
// every rank makes the same calls in the same order.
type TiledAlltoall[T any] struct {
	c      *Coll
	comm   *endpoint.Comm // private: the window's group
	tr     *onesided.WindowTransport
	p      *onesided.Pipeline
	iters  int
	count  int
	es     int
	maxK   int
	maxD   int
	out    [][]T
	in     [][]T
	broken error
	freed  bool
}

// TiledOption configures NewTiledAlltoall.
type TiledOption func(*tiledConfig) error

type tiledConfig struct {
	k, d       int
	maxK, maxD int
	win        []onesided.Option
}

// WithTiles sets the starting shape: tiles of k iterations, d tiles in
// flight (default: iters/8 and 3, until Tune or SetTiles changes it).
func WithTiles(k, d int) TiledOption {
	return func(c *tiledConfig) error {
		if k <= 0 || d <= 0 {
			return fmt.Errorf("collectives: WithTiles(%d, %d): both must be > 0: %w", k, d, ErrInvalid)
		}
		c.k, c.d = k, d
		return nil
	}
}

// WithTileLimits bounds the shapes the handle can take (default: k up to
// iters, d up to 3); its window is sized for the largest, once.
func WithTileLimits(maxK, maxD int) TiledOption {
	return func(c *tiledConfig) error {
		if maxK <= 0 || maxD <= 0 {
			return fmt.Errorf("collectives: WithTileLimits(%d, %d): both must be > 0: %w", maxK, maxD, ErrInvalid)
		}
		c.maxK, c.maxD = maxK, maxD
		return nil
	}
}

// WithWindow passes options to the window the tiles travel through
// (onesided.WithSharedMemory, onesided.WithProvider, ...).
func WithWindow(opts ...onesided.Option) TiledOption {
	return func(c *tiledConfig) error { c.win = append(c.win, opts...); return nil }
}

// NewTiledAlltoall returns an overlapped all-to-all over c's ranks for a
// loop of iters iterations, each producing count elements of T for every
// rank. It is collective over c (it duplicates c's communicator and
// allocates a window over it). The element type is any pointer-free type,
// as for the other collectives.
func NewTiledAlltoall[T any](ctx context.Context, c *Coll, iters, count int, opts ...TiledOption) (*TiledAlltoall[T], error) {
	if c == nil || c.freed {
		return nil, fmt.Errorf("collectives: NewTiledAlltoall on a nil or freed handle: %w", ErrInvalid)
	}
	if c.broken != nil {
		return nil, fmt.Errorf("collectives: NewTiledAlltoall on a failed handle: %w", ErrClosed)
	}
	es, err := elemSize[T]()
	if err != nil {
		return nil, fmt.Errorf("collectives: NewTiledAlltoall: %w", err)
	}
	if iters <= 0 || count <= 0 {
		return nil, fmt.Errorf("collectives: NewTiledAlltoall: %d iterations of %d elements: both must be > 0: %w", iters, count, ErrInvalid)
	}
	cfg := tiledConfig{k: max(1, iters/8), d: 3, maxK: iters, maxD: 3}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("collectives: NewTiledAlltoall: nil option: %w", ErrInvalid)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	cfg.maxK, cfg.maxD = max(cfg.maxK, min(cfg.k, iters)), max(cfg.maxD, cfg.d)
	comm, err := c.comm.Dup(ctx)
	if err != nil {
		return nil, fmt.Errorf("collectives: NewTiledAlltoall: %w", err)
	}
	a := &TiledAlltoall[T]{c: c, comm: comm, iters: iters, count: count, es: es,
		maxK: min(cfg.maxK, iters), maxD: cfg.maxD,
		out: make([][]T, c.size), in: make([][]T, c.size)}
	a.tr = onesided.NewWindowTransport(comm, cfg.win...)
	err = a.tr.Prepare(ctx, a.maxK*count*es, a.maxD+1, 2*a.maxD)
	if err == nil {
		err = a.SetTiles(ctx, cfg.k, cfg.d)
	}
	if err != nil {
		a.broken = err
		return nil, errors.Join(fmt.Errorf("collectives: NewTiledAlltoall: %w", err), a.Free(ctx))
	}
	return a, nil
}

// Tiles returns the current shape: iterations per tile and tiles in
// flight.
func (a *TiledAlltoall[T]) Tiles() (k, d int) {
	if a == nil || a.p == nil {
		return 0, 0
	}
	cfg := a.p.Config()
	return cfg.K, cfg.D
}

// Iters returns the loop's iterations and the elements each produces per
// rank.
func (a *TiledAlltoall[T]) Iters() (iters, count int) {
	if a == nil {
		return 0, 0
	}
	return a.iters, a.count
}

func (a *TiledAlltoall[T]) usable(op string) error {
	switch {
	case a == nil || a.freed:
		return fmt.Errorf("collectives: TiledAlltoall.%s on a nil or freed handle: %w", op, ErrClosed)
	case a.broken != nil:
		return fmt.Errorf("collectives: TiledAlltoall.%s after a failed call (%v): %w", op, a.broken, ErrClosed)
	}
	return nil
}

// fail records err as the handle's failure: after it the ranks' tile
// sequences may differ, so the handle is unusable.
func (a *TiledAlltoall[T]) fail(err error) error {
	if err != nil && a.broken == nil {
		a.broken = err
	}
	return err
}

// SetTiles sets the shape, k iterations per tile (clipped to iters) and d
// tiles in flight, within the handle's limits. It is collective: every
// rank sets the same shape between the same two calls.
func (a *TiledAlltoall[T]) SetTiles(ctx context.Context, k, d int) error {
	if err := a.usable("SetTiles"); err != nil {
		return err
	}
	k = min(k, a.iters)
	if k <= 0 || d <= 0 || k > a.maxK || d > a.maxD {
		return fmt.Errorf("collectives: TiledAlltoall.SetTiles(%d, %d): want 1..%d iterations and 1..%d tiles in flight: %w",
			k, d, a.maxK, a.maxD, ErrInvalid)
	}
	p, err := onesided.NewPipeline(ctx, a.tr, a.pcfg(k, d))
	if err != nil {
		return a.fail(fmt.Errorf("collectives: TiledAlltoall.SetTiles: %w", err))
	}
	a.p = p
	return nil
}

func (a *TiledAlltoall[T]) pcfg(k, d int) onesided.PipelineConfig {
	return onesided.PipelineConfig{N: a.iters, K: k, D: d, BytesPerIter: a.count * a.es}
}

// wrap adapts typed compute and consume functions to the pipeline's.
func (a *TiledAlltoall[T]) wrap(compute TileCompute[T], consume TileConsume[T]) (onesided.ComputeFunc, onesided.ConsumeFunc) {
	return func(t Tile, out [][]byte) error {
			for p, b := range out {
				a.out[p] = elems[T](b)
			}
			return compute(t, a.out)
		}, func(t Tile, in [][]byte) error {
			for p, b := range in {
				a.in[p] = elems[T](b)
			}
			return consume(t, a.in)
		}
}

// Run runs the loop once: compute for every tile in order, each tile
// sent as soon as it is computed, and consume for every tile of every
// rank as it arrives (tile t of all ranks together, in tile order; the
// last D tiles after the loop). Collective. An error from compute or
// consume ends the call (and the handle: Free it).
func (a *TiledAlltoall[T]) Run(ctx context.Context, compute TileCompute[T], consume TileConsume[T]) error {
	if err := a.usable("Run"); err != nil {
		return err
	}
	if compute == nil || consume == nil {
		return fmt.Errorf("collectives: TiledAlltoall.Run: nil compute or consume function: %w", ErrInvalid)
	}
	cf, uf := a.wrap(compute, consume)
	if err := a.p.Run(ctx, cf, uf); err != nil {
		return a.fail(fmt.Errorf("collectives: TiledAlltoall.Run: %w", err))
	}
	return nil
}

// Alltoall runs the loop once and gathers the result the way Alltoall
// lays it out: recv holds Size()·iters·count elements, block i (i·iters·count
// onwards) what rank i computed for this rank, iteration after iteration.
func (a *TiledAlltoall[T]) Alltoall(ctx context.Context, compute TileCompute[T], recv []T) error {
	if err := a.usable("Alltoall"); err != nil {
		return err
	}
	if err := checkLen("recv", len(recv), a.c.size*a.iters*a.count); err != nil {
		return fmt.Errorf("collectives: TiledAlltoall.Alltoall: %w", err)
	}
	block := a.iters * a.count
	return a.Run(ctx, compute, func(t Tile, in [][]T) error {
		for p, b := range in {
			memcopy.CopyOf(recv[p*block+t.First*a.count:], b)
		}
		return nil
	})
}

// Tune chooses the shape for this loop and sets it: onesided.Tune's
// guided search (a few runs that measure the computation and the
// transfers, a model that ranks the tile sizes, a few timed runs of the
// best), every rank agreeing on the result, which it returns. compute and
// consume are called for the trial runs on whatever the buffers hold:
// they must tolerate being repeated (an out-of-place computation does).
// tc's N and BytesPerIter are the handle's; its candidates, Trials,
// Budget and Exhaustive apply (candidates beyond the handle's limits are
// left out). Collective.
func (a *TiledAlltoall[T]) Tune(ctx context.Context, tc onesided.TuneConfig, compute TileCompute[T], consume TileConsume[T]) (onesided.TuneResult, error) {
	if err := a.usable("Tune"); err != nil {
		return onesided.TuneResult{}, err
	}
	if compute == nil || consume == nil {
		return onesided.TuneResult{}, fmt.Errorf("collectives: TiledAlltoall.Tune: nil compute or consume function: %w", ErrInvalid)
	}
	tc.N, tc.BytesPerIter = a.iters, a.count*a.es
	tc.Ks, tc.Ds = within(tc.Ks, a.maxK), within(tc.Ds, a.maxD)
	if len(tc.Ks) == 0 {
		for k := 1; k < a.maxK; k *= 2 {
			tc.Ks = append(tc.Ks, k)
		}
		tc.Ks = append(tc.Ks, a.maxK)
	}
	if len(tc.Ds) == 0 {
		for d := 1; d <= a.maxD; d++ {
			tc.Ds = append(tc.Ds, d)
		}
	}
	cf, uf := a.wrap(compute, consume)
	res, err := onesided.Tune(ctx, a.comm, a.tr, tc, cf, uf)
	if err != nil {
		return res, a.fail(fmt.Errorf("collectives: TiledAlltoall.Tune: %w", err))
	}
	return res, a.SetTiles(ctx, res.Config.K, res.Config.D)
}

// within returns the values of v in 1..limit.
func within(v []int, limit int) []int {
	var out []int
	for _, x := range v {
		if x >= 1 && x <= limit {
			out = append(out, x)
		}
	}
	return out
}

// Free releases the window and the private communicator (collective,
// like the window's Free; after a failed call it still releases this
// rank's part). Idempotent.
func (a *TiledAlltoall[T]) Free(ctx context.Context) error {
	if a == nil || a.freed {
		return nil
	}
	a.freed = true
	var err error
	if a.tr != nil {
		err = a.tr.Close(ctx)
	}
	if a.comm != nil {
		err = errors.Join(err, a.comm.Free())
	}
	if err != nil {
		return fmt.Errorf("collectives: TiledAlltoall.Free: %w", err)
	}
	return nil
}
