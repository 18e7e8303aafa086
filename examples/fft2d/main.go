// Command fft2d is a distributed two-dimensional FFT whose transpose is
// the overlapped all-to-all of package collectives (TiledAlltoall): the
// row FFTs are the per-tile computation, and each tile's column blocks
// travel to their ranks while the next rows are transformed.
//
// The N×N complex matrix A is split by rows: rank r of P owns rows
// [r·N/P, (r+1)·N/P). The transform runs in three steps:
//
//  1. FFT every owned row (a tile of K rows at a time) and cut each
//     transformed row into P blocks of N/P columns: block q goes to rank
//     q (the tile's out[q]);
//  2. as tiles arrive, each rank writes the blocks it receives into the
//     transposed layout: row c of its part is global column r·N/P + c
//     (the consume function);
//  3. FFT every row of that transposed part, which is a column FFT of the
//     original.
//
// Rank r ends with columns [r·N/P, (r+1)·N/P) of the 2D transform, one
// per row (the transposed layout that distributed FFTs usually leave).
// Each rank checks its part against a direct (non-FFT) 2D DFT of the
// whole matrix, which it computes itself, and the largest relative
// difference is agreed with collectives.Allreduce. Each rank prints
//
//	rank R of P: columns A..B, fft2d ok
//
// and rank 0 adds
//
//	fft2d: P ranks, NxN, transpose TRANSPOSE, max relative diff E vs direct DFT (tolerance T)
//
// where TRANSPOSE is "tiled K=.. D=.." or "alltoall" (-plain: compute
// every row, then collectives.Alltoall, for comparison). With -tune the
// tile shape is chosen by TiledAlltoall.Tune first; -k and -d set it by
// hand. -reps R repeats the transform and rank 0 reports the median time
// of a transform. Run it under a launcher:
//
//	fabrun -n 4 fft2d -n 256 -tune
//	fabrun -n 2 fft2d -plain
//	fft2d                             # one rank alone
//
// Exit status: 0 when the result matches, 1 on any error or mismatch, 2
// for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/cmplx"
	"os"
	"slices"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/onesided"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "fft2d: %v (fft2d -h lists the flags)\n", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "fft2d:", err)
		os.Exit(1)
	}
}

// usageError is a bad flag value.
type usageError struct{ error }

// config is what the flags ask for.
type config struct {
	n       int
	plain   bool
	tune    bool
	k, d    int
	reps    int
	timeout time.Duration
}

// maxN bounds the matrix: every rank computes the direct DFT of all of
// it (N³ operations) for the check.
const maxN = 1024

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("fft2d", flag.ContinueOnError)
	fs.IntVar(&cfg.n, "n", 64, "matrix size N (a power of two, a multiple of the rank count)")
	fs.BoolVar(&cfg.plain, "plain", false, "transpose with collectives.Alltoall after all row FFTs instead of the overlapped all-to-all")
	fs.BoolVar(&cfg.tune, "tune", false, "choose the tile shape with TiledAlltoall.Tune first")
	fs.IntVar(&cfg.k, "k", 0, "rows per tile (0: N/P/8, or tuned)")
	fs.IntVar(&cfg.d, "d", 0, "tiles in flight (0: 3, or tuned)")
	fs.IntVar(&cfg.reps, "reps", 1, "transforms to run (the first is checked; rank 0 reports the median time)")
	fs.DurationVar(&cfg.timeout, "timeout", 60*time.Second, "give up after this long")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fs.Usage()
			return cfg, err
		}
		return cfg, usageError{err}
	}
	switch {
	case fs.NArg() > 0:
		return cfg, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	case !isPow2(cfg.n) || cfg.n > maxN:
		return cfg, usageError{fmt.Errorf("-n %d: want a power of two up to %d", cfg.n, maxN)}
	case cfg.k < 0 || cfg.d < 0 || cfg.d > 8:
		return cfg, usageError{fmt.Errorf("-k %d -d %d: want k ≥ 0 and 0 ≤ d ≤ 8", cfg.k, cfg.d)}
	case cfg.plain && (cfg.tune || cfg.k > 0 || cfg.d > 0):
		return cfg, usageError{errors.New("-plain has no tiles: drop -tune, -k and -d")}
	case cfg.reps < 1:
		return cfg, usageError{fmt.Errorf("-reps %d: want at least 1", cfg.reps)}
	case cfg.timeout <= 0:
		return cfg, usageError{fmt.Errorf("-timeout %v: want a positive duration", cfg.timeout)}
	}
	return cfg, nil
}

// input is element (i, j) of the matrix A: irregular values, so that a
// block in the wrong place changes the result.
func input(i, j int) complex128 {
	return complex(float64((i*31+j*17)%23)/23-0.5, float64((i*13+j*7)%19)/19-0.5)
}

// part is one rank's share of the transform.
type part struct {
	n, rows, me, p int
	tw             []complex128
	row            []complex128   // scratch: one row being transformed
	t              [][]complex128 // the transposed part: rows·n, row c = global column me·rows+c
}

// computeRows transforms rows first..first+count-1 of this rank's part of
// A (out of place: A is never changed, so a tile can be recomputed) and
// writes block q of each into out[q].
func (pt *part) computeRows(first, count int, out [][]complex128) {
	for i := range count {
		g := pt.me*pt.rows + first + i
		for j := range pt.n {
			pt.row[j] = input(g, j)
		}
		fft(pt.row, pt.tw)
		for q := range pt.p {
			copy(out[q][i*pt.rows:(i+1)*pt.rows], pt.row[q*pt.rows:])
		}
	}
}

// place writes the blocks of a tile of rows [first, first+count) of every
// rank into the transposed part: element c of rank q's row first+i is
// column q·rows+first+i of row c.
func (pt *part) place(first, count int, in [][]complex128) {
	for q, b := range in {
		for i := range count {
			col := q*pt.rows + first + i
			for c := range pt.rows {
				pt.t[c][col] = b[i*pt.rows+c]
			}
		}
	}
}

func run(args []string, out io.Writer) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	c, err := collectives.New(ctx, w.Comm())
	if err != nil {
		return err
	}
	defer c.Free()
	P, me := c.Size(), c.Rank()
	if cfg.n%P != 0 {
		return fmt.Errorf("a %dx%d matrix does not split into %d equal row blocks", cfg.n, cfg.n, P)
	}
	rows := cfg.n / P
	pt := &part{n: cfg.n, rows: rows, me: me, p: P, tw: twiddles(cfg.n), row: make([]complex128, cfg.n)}
	pt.t = make([][]complex128, rows)
	for i := range pt.t {
		pt.t[i] = make([]complex128, cfg.n)
	}

	var transform func() error
	how := "alltoall"
	if cfg.plain {
		send := make([]complex128, rows*cfg.n) // block q: rows×rows for rank q
		recv := make([]complex128, rows*cfg.n)
		blocks := make([][]complex128, P)
		transform = func() error {
			for q := range blocks {
				blocks[q] = send[q*rows*rows : (q+1)*rows*rows]
			}
			pt.computeRows(0, rows, blocks)
			if err := collectives.Alltoall(ctx, c, send, recv); err != nil {
				return err
			}
			for q := range blocks {
				blocks[q] = recv[q*rows*rows : (q+1)*rows*rows]
			}
			pt.place(0, rows, blocks)
			return nil
		}
	} else {
		k, d := cfg.k, cfg.d
		if k == 0 {
			k = max(1, rows/8)
		}
		if d == 0 {
			d = 3
		}
		a, err := collectives.NewTiledAlltoall[complex128](ctx, c, rows, rows,
			collectives.WithTiles(k, d), collectives.WithTileLimits(rows, max(3, d)))
		if err != nil {
			return err
		}
		defer a.Free(ctx)
		compute := func(t collectives.Tile, out [][]complex128) error {
			pt.computeRows(t.First, t.Count, out)
			return nil
		}
		consume := func(t collectives.Tile, in [][]complex128) error {
			pt.place(t.First, t.Count, in)
			return nil
		}
		if cfg.tune {
			if _, err := a.Tune(ctx, onesided.TuneConfig{}, compute, consume); err != nil {
				return err
			}
		}
		k, d = a.Tiles()
		how = fmt.Sprintf("tiled K=%d D=%d", k, d)
		transform = func() error { return a.Run(ctx, compute, consume) }
	}

	var times []time.Duration
	for rep := range cfg.reps {
		if err := collectives.Barrier(ctx, c); err != nil {
			return err
		}
		t0 := time.Now()
		if err := transform(); err != nil {
			return fmt.Errorf("transform %d: %w", rep, err)
		}
		for _, r := range pt.t { // the column FFTs
			fft(r, pt.tw)
		}
		times = append(times, time.Since(t0))
		if rep == 0 {
			if err := check(ctx, c, pt, cfg, how, out); err != nil {
				return err
			}
		}
	}
	if cfg.reps > 1 {
		worst := make([]int64, 1)
		slices.Sort(times)
		if err := collectives.Allreduce(ctx, c, []int64{int64(times[len(times)/2])}, worst, collectives.Max[int64]()); err != nil {
			return err
		}
		if me == 0 {
			fmt.Fprintf(out, "fft2d: median of %d transforms %v (slowest rank)\n", cfg.reps, time.Duration(worst[0]))
		}
	}
	return nil
}

// check compares this rank's columns with a direct 2D DFT and agrees on
// the largest relative difference (Allreduce, max): every rank fails if
// any block is wrong.
func check(ctx context.Context, c *collectives.Coll, pt *part, cfg config, how string, out io.Writer) error {
	ref := directColumns(cfg.n, pt.me*pt.rows, pt.rows)
	scale := 0.0
	for _, r := range ref {
		for _, v := range r {
			scale = max(scale, cmplx.Abs(v))
		}
	}
	diff := 0.0
	for i := range ref {
		for k := range ref[i] {
			diff = max(diff, cmplx.Abs(pt.t[i][k]-ref[i][k]))
		}
	}
	worst := []float64{0, 0}
	if err := collectives.Allreduce(ctx, c, []float64{diff, scale}, worst, collectives.Max[float64]()); err != nil {
		return err
	}
	rel := worst[0] / max(worst[1], 1)
	tol := tolerance(cfg.n)
	if !(rel <= tol) {
		return fmt.Errorf("rank %d: the transform differs from the direct DFT: max relative diff %g > %g (this rank's columns: %g)",
			pt.me, rel, tol, diff/max(worst[1], 1))
	}
	fmt.Fprintf(out, "rank %d of %d: columns %d..%d, fft2d ok\n", pt.me, pt.p, pt.me*pt.rows, (pt.me+1)*pt.rows-1)
	if pt.me == 0 {
		fmt.Fprintf(out, "fft2d: %d ranks, %dx%d, transpose %s, max relative diff %.1e vs direct DFT (tolerance %.0e)\n",
			pt.p, cfg.n, cfg.n, how, rel, tol)
	}
	return nil
}

// tolerance is the relative error allowed for an N×N transform: the
// FFT's rounding grows like log N, the direct sums' like N.
func tolerance(n int) float64 { return 1e-12 * float64(n) }

// directColumns returns columns [first, first+count) of the 2D DFT of A,
// column j as row j-first: X[k1][j] = Σ_r Σ_s A[r][s]·e^{-2πi(k1·r + j·s)/N},
// summed directly (first along rows, then down the columns).
func directColumns(n, first, count int) [][]complex128 {
	w := make([]complex128, n) // w[m] = e^{-2πim/N}
	for m := range w {
		w[m] = cmplx.Exp(complex(0, -2*math.Pi*float64(m)/float64(n)))
	}
	// y[r][j] = Σ_s A[r][s]·w^{js}: the row transforms of the columns wanted.
	y := make([][]complex128, n)
	for r := range y {
		y[r] = make([]complex128, count)
		for jj := range count {
			j := first + jj
			var s complex128
			for x := range n {
				s += input(r, x) * w[j*x%n]
			}
			y[r][jj] = s
		}
	}
	res := make([][]complex128, count)
	for jj := range res {
		res[jj] = make([]complex128, n)
		for k := range n {
			var s complex128
			for r := range n {
				s += y[r][jj] * w[k*r%n]
			}
			res[jj][k] = s
		}
	}
	return res
}
