package onesided

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

// tileValue is what rank src computes in iteration it for destination dst
// in run r: a deterministic, position-dependent pattern.
func tileFill(b []byte, src, dst, it, r int) {
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], uint32(src)<<28^uint32(dst)<<24^uint32(it)<<10^uint32(r)<<8^uint32(i))
	}
}

// referenceExchange is the non-overlapped scheme: compute every iteration,
// then exchange everything with puts and a fence. It returns, per source
// rank, the N×bpi bytes that rank computed for this one.
func referenceExchange(ctx context.Context, w *Window, n, bpi, run int) ([][]byte, error) {
	me, P := w.Rank(), w.Size()
	for q := 0; q < P; q++ {
		out := make([]byte, n*bpi) // in flight until the fence
		for it := 0; it < n; it++ {
			tileFill(out[it*bpi:(it+1)*bpi], me, q, it, run)
		}
		if err := w.Put(q, me*n*bpi, out); err != nil {
			return nil, err
		}
	}
	if err := w.Fence(ctx); err != nil {
		return nil, err
	}
	res := make([][]byte, P)
	for q := range res {
		res[q] = append([]byte(nil), w.Bytes()[q*n*bpi:(q+1)*n*bpi]...)
	}
	return res, w.Fence(ctx)
}

// pipelineExchange runs the same workload through a Pipeline.
func pipelineExchange(ctx context.Context, p *Pipeline, run int) ([][]byte, error) {
	cfg := p.Config()
	P, me := p.tr.Size(), p.tr.Rank()
	res := make([][]byte, P)
	for q := range res {
		res[q] = make([]byte, cfg.N*cfg.BytesPerIter)
	}
	next := 0
	compute := func(t Tile, out [][]byte) error {
		for q := 0; q < P; q++ {
			if len(out[q]) != t.Count*cfg.BytesPerIter {
				return fmt.Errorf("out[%d] has %d bytes for %d iterations", q, len(out[q]), t.Count)
			}
			for it := 0; it < t.Count; it++ {
				tileFill(out[q][it*cfg.BytesPerIter:(it+1)*cfg.BytesPerIter], me, q, t.First+it, run)
			}
		}
		return nil
	}
	consume := func(t Tile, in [][]byte) error {
		if t.Index != next {
			return fmt.Errorf("consumed tile %d, want %d", t.Index, next)
		}
		next++
		for q := 0; q < P; q++ {
			copy(res[q][t.First*cfg.BytesPerIter:], in[q])
		}
		return nil
	}
	if err := p.Run(ctx, compute, consume); err != nil {
		return nil, err
	}
	if next != cfg.Tiles() {
		return nil, fmt.Errorf("consumed %d tiles of %d", next, cfg.Tiles())
	}
	return res, nil
}

// pipelineMatrix checks the pipeline against the reference for many shapes.
func pipelineMatrix(ctx context.Context, g Group, shapes []PipelineConfig, opts ...Option) (err error) {
	if len(shapes) == 0 {
		return nil
	}
	// One window for the reference and one for the transport, each sized
	// for the largest shape, so the matrix does not pay for a libfabric
	// endpoint per shape.
	maxRef, maxTile, maxD := 0, 0, 0
	for _, c := range shapes {
		maxRef = max(maxRef, g.Size()*c.N*c.BytesPerIter)
		maxTile, maxD = max(maxTile, c.K*c.BytesPerIter), max(maxD, c.D)
	}
	ref, err := Allocate(ctx, g, maxRef, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, ref.Free)
	tr := NewWindowTransport(g, opts...)
	defer cleanup(ctx, &err, tr.Close)
	if err := tr.Prepare(ctx, maxTile, maxD+1, 2*maxD); err != nil {
		return err
	}
	for _, cfg := range shapes {
		p, err := NewPipeline(ctx, tr, cfg)
		if err != nil {
			return err
		}
		for run := 0; run < 2; run++ {
			want, err := referenceExchange(ctx, ref, cfg.N, cfg.BytesPerIter, run)
			if err != nil {
				return err
			}
			got, err := pipelineExchange(ctx, p, run)
			if err != nil {
				return fmt.Errorf("%+v run %d: %w", cfg, run, err)
			}
			for q := range want {
				if !bytes.Equal(got[q], want[q]) {
					return fmt.Errorf("%+v run %d: data from rank %d differs from the non-overlapped exchange", cfg, run, q)
				}
			}
		}
	}
	return nil
}

func pipelineShapes(big bool) []PipelineConfig {
	var s []PipelineConfig
	for _, n := range []int{1, 7, 16, 33} {
		for _, k := range []int{1, 3, 4, 16, 40} {
			for _, d := range []int{1, 2, 3} {
				s = append(s, PipelineConfig{N: n, K: k, D: d, BytesPerIter: 24})
			}
		}
	}
	if big {
		s = append(s, PipelineConfig{N: 64, K: 5, D: 2, BytesPerIter: 4096})
	}
	return s
}

func TestPipelineMatchesExchangeDirect(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			runRanks(t, n, func(ctx context.Context, g Group) error {
				return pipelineMatrix(ctx, g, pipelineShapes(true), WithSharedMemory(ShmOnly))
			})
		})
	}
}

func TestPipelineConfigErrors(t *testing.T) {
	for _, c := range []PipelineConfig{{}, {N: 1, K: 0, D: 1, BytesPerIter: 1}, {N: 4, K: 2, D: -1, BytesPerIter: 8}} {
		if _, err := NewPipeline(context.Background(), nil, c); err == nil {
			t.Errorf("NewPipeline(%+v) accepted", c)
		}
	}
	if (PipelineConfig{N: 10, K: 3}).Tiles() != 4 {
		t.Errorf("Tiles(10, 3) != 4")
	}
}

// TestTransportPrepareOverflow: tile and slot counts whose window size
// overflows an int are an ErrInvalid at once (the size used to wrap: a
// window of the wrapped size, a clear of terabytes of signal words that
// never ended, slices past the window's end); sizes that fit still work.
func TestTransportPrepareOverflow(t *testing.T) {
	runRanks(t, 1, func(ctx context.Context, g Group) (err error) {
		tr := NewWindowTransport(g)
		defer cleanup(ctx, &err, tr.Close)
		for _, c := range [][3]int{{1 << 62, 64, 1 << 40}, {8, 8, math.MaxInt}, {8, math.MaxInt, 8}, {math.MaxInt, 1, 1}, {1 << 62, 1 << 16, 1}, {8, MaxTransportSlots + 1, 1}, {8, 1, MaxTransportSlots + 1}} {
			if err := tr.Prepare(ctx, c[0], c[1], c[2]); !errors.Is(err, ErrInvalid) {
				return fmt.Errorf("Prepare%v: %v, want ErrInvalid", c, err)
			}
		}
		if err := tr.Prepare(ctx, 64, 2, 2); err != nil {
			return err
		}
		if b := tr.SendBuf(1, 0); len(b) != 64 {
			return fmt.Errorf("SendBuf after Prepare(64, 2, 2): %d bytes", len(b))
		}
		if err := tr.Prepare(ctx, 4096, 4, 4); err != nil {
			return err
		}
		return tr.Prepare(ctx, 64, 2, 2) // reuses that window, clearing its signals
	})
}

func TestAutotuneAgrees(t *testing.T) {
	runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
		tr := NewWindowTransport(g, WithSharedMemory(ShmOnly))
		defer cleanup(ctx, &err, tr.Close)
		compute := func(t Tile, out [][]byte) error {
			for _, o := range out {
				tileFill(o, g.Rank(), 0, t.First, 0)
			}
			return nil
		}
		consume := func(Tile, [][]byte) error { return nil }
		cfg, err := Autotune(ctx, g, tr, TuneConfig{N: 32, BytesPerIter: 256, Ds: []int{1, 2}, Trials: 2}, compute, consume)
		if err != nil {
			return err
		}
		all, err := g.Allgather(ctx, []byte(fmt.Sprintf("%+v", cfg)))
		if err != nil {
			return err
		}
		for _, a := range all {
			if string(a) != string(all[0]) {
				return fmt.Errorf("ranks chose different shapes: %q vs %q", a, all[0])
			}
		}
		if cfg.K < 1 || cfg.K > 32 || cfg.D < 1 || cfg.D > 2 || cfg.N != 32 {
			return fmt.Errorf("autotune chose %+v", cfg)
		}
		return nil
	})
}

// TestTuneSearches: the guided search measures its model (compute time
// per iteration, non-negative transfer costs), times a few shapes within
// the candidates and picks one of those it timed, the same on every
// rank; the exhaustive search times every candidate Trials times and
// picks the lowest median.
func TestTuneSearches(t *testing.T) {
	runRanks(t, 3, func(ctx context.Context, g Group) (err error) {
		tr := NewWindowTransport(g, WithSharedMemory(ShmOnly))
		defer cleanup(ctx, &err, tr.Close)
		compute := func(t Tile, out [][]byte) error {
			for q, o := range out {
				tileFill(o, g.Rank(), q, t.First, 0)
			}
			return nil
		}
		consume := func(Tile, [][]byte) error { return nil }
		tc := TuneConfig{N: 40, BytesPerIter: 64, Ks: []int{1, 4, 8, 16, 40}, Ds: []int{1, 3}}
		guided, err := Tune(ctx, g, tr, tc, compute, consume)
		if err != nil {
			return err
		}
		if guided.Compute <= 0 || guided.TileCost < 0 || guided.IterCost < 0 || guided.Runs < 5 || len(guided.Trials) < 2 {
			return fmt.Errorf("guided search: %+v", guided)
		}
		chosen := false
		for _, tt := range guided.Trials {
			if !slices.Contains(tc.Ks, tt.K) || tt.D < 1 || tt.D > 3 || len(tt.Times) == 0 {
				return fmt.Errorf("guided search timed %+v", tt)
			}
			chosen = chosen || tt.K == guided.Config.K && tt.D == guided.Config.D
		}
		if !chosen || guided.Config.N != 40 || guided.Config.BytesPerIter != 64 {
			return fmt.Errorf("guided search chose %+v, not among the shapes it timed", guided.Config)
		}
		tc.Exhaustive, tc.Trials = true, 2
		ex, err := Tune(ctx, g, tr, tc, compute, consume)
		if err != nil {
			return err
		}
		if len(ex.Trials) != 10 {
			return fmt.Errorf("exhaustive search timed %d shapes, want 10", len(ex.Trials))
		}
		best := ex.Trials[0]
		for _, tt := range ex.Trials {
			if len(tt.Times) != 2 {
				return fmt.Errorf("shape %+v timed %d times, want 2", tt, len(tt.Times))
			}
			if tt.Median() < best.Median() {
				best = tt
			}
		}
		if ex.Config.K != best.K || ex.Config.D != best.D {
			return fmt.Errorf("exhaustive search chose %+v, the lowest median is K=%d D=%d", ex.Config, best.K, best.D)
		}
		for _, res := range []TuneResult{guided, ex} {
			all, err := g.Allgather(ctx, []byte(fmt.Sprintf("%+v", res.Config)))
			if err != nil {
				return err
			}
			for _, a := range all {
				if string(a) != string(all[0]) {
					return fmt.Errorf("ranks chose different shapes: %q vs %q", a, all[0])
				}
			}
		}
		return nil
	})
}

func TestTuneErrors(t *testing.T) {
	ctx := context.Background()
	nop := func(Tile, [][]byte) error { return nil }
	g := newMemWorld(1)[0]
	tr := NewWindowTransport(g, WithSharedMemory(ShmOnly))
	for _, tc := range []TuneConfig{{}, {N: 4}, {N: 4, BytesPerIter: 8, Trials: -1}, {N: 4, BytesPerIter: 8, Ks: []int{0}}, {N: 4, BytesPerIter: 8, Ds: []int{-2}}, {N: 4, BytesPerIter: 8, Budget: -1}} {
		if _, err := Tune(ctx, g, tr, tc, nop, nop); !errors.Is(err, ErrInvalid) {
			t.Errorf("Tune(%+v): %v, want ErrInvalid", tc, err)
		}
	}
	if _, err := Tune(ctx, g, nil, TuneConfig{N: 4, BytesPerIter: 8}, nop, nop); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil transport: %v", err)
	}
	if _, err := Autotune(ctx, g, tr, TuneConfig{N: 4, BytesPerIter: 8}, nil, nop); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil compute: %v", err)
	}
	if d := (TuneTrial{}).Median() + (TuneTrial{}).Best(); d != 0 {
		t.Errorf("empty trial: %v", d)
	}
}
