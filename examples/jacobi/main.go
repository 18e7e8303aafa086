// Command jacobi solves Laplace's equation on a rectangle with Jacobi
// iterations distributed over the job's ranks, and stops when a global
// residual falls below a tolerance: the loop of many stencil codes, where
// a point-to-point halo exchange feeds each sweep and a collective
// reduction decides when to stop.
//
// The grid has NY×NX interior cells and a fixed boundary: 1 along the top
// edge, 0 along the others. Rank r of P owns a band of about NY/P rows,
// stored with one ghost row above and below. Each iteration
//
//  1. refreshes the ghost rows from the neighbouring ranks (Isend and
//     Irecv on the communicator, endpoint.ProcNull past the top and bottom
//     bands, whose ghost rows keep the boundary values);
//  2. replaces every interior cell by the mean of its four neighbours;
//  3. takes the largest change of any cell in this band and combines it
//     over all ranks with collectives.Allreduce (Max): the residual.
//
// The run stops when the residual is below -tol (or fails after -maxiter
// iterations). The maximum is exact in floating point, so every rank and
// a serial run stop at the same iteration; the result is then checked, not
// only printed: rank 0 gathers the bands (collectives.Gatherv), repeats the
// iterations serially on the whole grid, and broadcasts the largest
// difference (collectives.Bcast), which must be 0. Each rank prints
//
//	rank R of P: rows A..B, jacobi ok
//
// and rank 0 adds
//
//	jacobi: P ranks, NYxNX grid, converged after K iterations (residual E < tol T), max |diff| 0 vs serial
//
// Run it under a launcher:
//
//	fabrun -n 4 jacobi -ny 64 -nx 48 -tol 1e-4
//	jacobi                                      # one rank alone
//
// Exit status: 0 when it converged and matches the serial run, 1 on any
// error, mismatch or no convergence, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "jacobi: %v (jacobi -h lists the flags)\n", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "jacobi:", err)
		os.Exit(1)
	}
}

// usageError is a bad flag value.
type usageError struct{ error }

// config is what the flags ask for.
type config struct {
	ny, nx  int
	tol     float64
	maxIter int
	timeout time.Duration
}

// maxCells bounds the grid: rank 0 holds two copies of it for the check.
const maxCells = 1 << 24

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("jacobi", flag.ContinueOnError)
	fs.IntVar(&cfg.ny, "ny", 24, "interior rows")
	fs.IntVar(&cfg.nx, "nx", 20, "interior columns")
	fs.Float64Var(&cfg.tol, "tol", 1e-3, "stop when no cell changes by this much in an iteration")
	fs.IntVar(&cfg.maxIter, "maxiter", 100000, "fail after this many iterations")
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
	case cfg.ny < 1 || cfg.nx < 1 || cfg.ny > maxCells/cfg.nx:
		return cfg, usageError{fmt.Errorf("grid %dx%d: want at least 1x1 and at most %d cells", cfg.ny, cfg.nx, maxCells)}
	case !(cfg.tol > 0) || math.IsInf(cfg.tol, 1):
		return cfg, usageError{fmt.Errorf("-tol %v: want a positive number", cfg.tol)}
	case cfg.maxIter < 1:
		return cfg, usageError{fmt.Errorf("-maxiter %d: want at least 1", cfg.maxIter)}
	case cfg.timeout <= 0:
		return cfg, usageError{fmt.Errorf("-timeout %v: want a positive duration", cfg.timeout)}
	}
	return cfg, nil
}

// band is rows [y0, y0+ny) of the interior (counted from 0), stored with
// a ghost row above and below and the boundary columns: (ny+2)×(nx+2).
type band struct{ y0, ny, nx int }

func (b band) at(i, j int) int { return i*(b.nx+2) + j }

// split returns the first row and row count of band k of n rows in p.
func split(n, p, k int) (first, length int) {
	q, r := n/p, n%p
	return k*q + min(k, r), q + min(1, max(0, r-k))
}

// initial returns the band with the boundary values in its frame (the
// ghost row above the top band is the top edge, 1) and 0 inside.
func (b band) initial() []float64 {
	u := make([]float64, (b.ny+2)*(b.nx+2))
	if b.y0 == 0 {
		for j := 1; j <= b.nx; j++ {
			u[b.at(0, j)] = 1
		}
	}
	return u
}

// sweep writes the Jacobi update of src's interior into dst and returns
// the largest change of a cell.
func sweep(dst, src []float64, b band) float64 {
	res := 0.0
	for i := 1; i <= b.ny; i++ {
		for j := 1; j <= b.nx; j++ {
			v := 0.25 * (src[b.at(i-1, j)] + src[b.at(i+1, j)] + src[b.at(i, j-1)] + src[b.at(i, j+1)])
			res = max(res, math.Abs(v-src[b.at(i, j)]))
			dst[b.at(i, j)] = v
		}
	}
	return res
}

// Tags of the halo messages: the direction they travel in.
const (
	tagUp = iota
	tagDown
)

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
	comm := w.Comm()
	c, err := collectives.New(ctx, comm)
	if err != nil {
		return err
	}
	defer c.Free()
	P, me := c.Size(), c.Rank()
	if cfg.ny < P {
		return fmt.Errorf("a grid of %d rows is too small for %d ranks: every rank needs a row", cfg.ny, P)
	}
	y0, ny := split(cfg.ny, P, me)
	b := band{y0: y0, ny: ny, nx: cfg.nx}
	u := [2][]float64{b.initial(), b.initial()}
	up, down := me-1, me+1
	if up < 0 {
		up = endpoint.ProcNull
	}
	if down >= P {
		down = endpoint.ProcNull
	}
	row := func(v []float64, i int) []byte { return endpoint.AsBytes(v[b.at(i, 1) : b.at(i, 1)+b.nx]) }

	iters, res := 0, math.Inf(1)
	for res >= cfg.tol {
		if iters == cfg.maxIter {
			return fmt.Errorf("no convergence after %d iterations: residual %g ≥ %g", iters, res, cfg.tol)
		}
		if err := ctx.Err(); err != nil { // a rank alone never waits
			return fmt.Errorf("iteration %d: %w", iters, err)
		}
		src, dst := u[iters%2], u[1-iters%2]
		var reqs []*endpoint.Request
		for _, x := range []struct {
			send bool
			buf  []byte
			peer int
			tag  int
		}{
			{false, row(src, 0), up, tagDown},    // ghost above: the upper band's last row, travelling down
			{false, row(src, ny+1), down, tagUp}, // ghost below
			{true, row(src, 1), up, tagUp},       // first row, up
			{true, row(src, ny), down, tagDown},  // last row, down
		} {
			var r *endpoint.Request
			if x.send {
				r, err = comm.Isend(x.buf, x.peer, x.tag)
			} else {
				r, err = comm.Irecv(x.buf, x.peer, x.tag)
			}
			if err != nil {
				return fmt.Errorf("iteration %d: halo: %w", iters, err)
			}
			reqs = append(reqs, r)
		}
		if err := endpoint.WaitAll(ctx, reqs...); err != nil {
			return fmt.Errorf("iteration %d: halo exchange: %w", iters, err)
		}
		local := []float64{sweep(dst, src, b)}
		global := make([]float64, 1)
		if err := collectives.Allreduce(ctx, c, local, global, collectives.Max[float64]()); err != nil {
			return fmt.Errorf("iteration %d: residual: %w", iters, err)
		}
		res = global[0]
		iters++
	}
	diff, err := check(ctx, c, u[iters%2], b, cfg, iters)
	if err != nil {
		return err
	}
	if diff != 0 {
		return fmt.Errorf("rank %d: the grid differs from the serial run: max |diff| %g", me, diff)
	}
	fmt.Fprintf(out, "rank %d of %d: rows %d..%d, jacobi ok\n", me, P, y0, y0+ny-1)
	if me == 0 {
		fmt.Fprintf(out, "jacobi: %d ranks, %dx%d grid, converged after %d iterations (residual %.3e < tol %g), max |diff| %g vs serial\n",
			P, cfg.ny, cfg.nx, iters, res, cfg.tol, diff)
	}
	return nil
}

// check gathers the bands at rank 0, which runs the serial solver with
// the same stopping rule and broadcasts the largest difference (or +Inf
// when the serial run stopped at another iteration).
func check(ctx context.Context, c *collectives.Coll, u []float64, b band, cfg config, iters int) (float64, error) {
	P, me := c.Size(), c.Rank()
	mine := make([]float64, 0, b.ny*b.nx)
	for i := 1; i <= b.ny; i++ {
		mine = append(mine, u[b.at(i, 1):b.at(i, 1)+b.nx]...)
	}
	var all []float64
	counts, displs := make([]int, P), make([]int, P)
	for r := range P {
		f, n := split(cfg.ny, P, r)
		counts[r], displs[r] = n*cfg.nx, f*cfg.nx
	}
	if me == 0 {
		all = make([]float64, cfg.ny*cfg.nx)
	}
	if err := collectives.Gatherv(ctx, c, mine, all, counts, displs, 0); err != nil {
		return 0, err
	}
	verdict := []float64{0}
	if me == 0 {
		ref, n, err := serial(ctx, cfg)
		if err != nil {
			return 0, err
		}
		if n != iters {
			verdict[0] = math.Inf(1)
		}
		g := band{ny: cfg.ny, nx: cfg.nx}
		for i := range cfg.ny {
			for j := range cfg.nx {
				verdict[0] = max(verdict[0], math.Abs(all[i*cfg.nx+j]-ref[g.at(i+1, j+1)]))
			}
		}
	}
	if err := collectives.Bcast(ctx, c, verdict, 0); err != nil {
		return 0, err
	}
	return verdict[0], nil
}

// serial solves the whole grid in one band with the same rule and
// returns the grid and the number of iterations.
func serial(ctx context.Context, cfg config) ([]float64, int, error) {
	g := band{ny: cfg.ny, nx: cfg.nx}
	u := [2][]float64{g.initial(), g.initial()}
	it := 0
	for res := math.Inf(1); res >= cfg.tol; it++ {
		if it == cfg.maxIter {
			return nil, it, fmt.Errorf("serial run: no convergence after %d iterations", it)
		}
		if err := ctx.Err(); err != nil {
			return nil, it, err
		}
		res = sweep(u[1-it%2], u[it%2], g)
	}
	return u[it%2], it, nil
}
