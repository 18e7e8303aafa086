package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// rankLimit bounds a rank that fabrun's own limit somehow did not end.
const rankLimit = time.Hour

// sizeIters is one size of a job: the block edge and its timed exchanges.
type sizeIters struct{ n, iters int }

// parseSpec reads N:ITERS,... as the driver writes it.
func parseSpec(s string) ([]sizeIters, error) {
	var out []sizeIters
	for _, f := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(f, ":")
		n, err1 := strconv.Atoi(a)
		it, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || n < 1 || it < 1 {
			return nil, fmt.Errorf("%w: size %q: want N:ITERS", sidebyside.ErrUsage, f)
		}
		out = append(out, sizeIters{n, it})
	}
	return out, nil
}

// block is one rank's (n+2)×(n+2) array of float64 with its ghost layer,
// and the layouts of its edges (rows contiguous, columns a vector).
type block struct {
	n        int
	a        []float64
	buf      []byte
	row, col *ddt.Type
}

func newBlock(n, rank int) (*block, error) {
	w := n + 2
	b := &block{n: n, a: make([]float64, w*w)}
	b.buf = endpoint.AsBytes(b.a)
	for y := 1; y <= n; y++ {
		for x := 1; x <= n; x++ {
			b.a[y*w+x] = cell(rank, y, x)
		}
	}
	var err error
	if b.row, err = ddt.Contiguous(n, ddt.Float64); err == nil {
		if err = b.row.Commit(); err == nil {
			if b.col, err = ddt.Vector(n, 1, w, ddt.Float64); err == nil {
				err = b.col.Commit()
			}
		}
	}
	return b, err
}

// cell is rank's value at (y, x) of its interior.
func cell(rank, y, x int) float64 { return float64(rank*1000000 + y*1000 + x) }

// at is the byte offset of cell (y, x).
func (b *block) at(y, x int) int { return 8 * (y*(b.n+2) + x) }

// The four edges, in the order of Cart.Neighbors for a 2D grid: north
// (dimension 0 down), south, west, east. send* are the interior's edges,
// recv* the ghost layer's.
func (b *block) sendAt() []int {
	return []int{b.at(1, 1), b.at(b.n, 1), b.at(1, 1), b.at(1, b.n)}
}
func (b *block) recvAt() []int {
	return []int{b.at(0, 1), b.at(b.n+1, 1), b.at(1, 0), b.at(1, b.n+1)}
}
func (b *block) types() []*ddt.Type { return []*ddt.Type{b.row, b.row, b.col, b.col} }

// check says whether the ghost layer holds the neighbours' edges: north
// ghost row the north neighbour's last row, and so on; 0 (as cleared)
// where the grid ends.
func (b *block) check(nb []int) error {
	n, w := b.n, b.n+2
	for i := 1; i <= n; i++ {
		for _, c := range []struct {
			k, y, x, sy, sx int
		}{{0, 0, i, n, i}, {1, n + 1, i, 1, i}, {2, i, 0, i, n}, {3, i, n + 1, i, 1}} {
			want := 0.0 // past the grid's border: untouched
			if nb[c.k] != endpoint.ProcNull {
				want = cell(nb[c.k], c.sy, c.sx)
			}
			if got := b.a[c.y*w+c.x]; got != want {
				return fmt.Errorf("N=%d: ghost cell (%d, %d) = %v, want %v from rank %d", n, c.y, c.x, got, want, nb[c.k])
			}
		}
	}
	return nil
}

// rankMain is one rank of the weft job: -role weft N:ITERS,...
func rankMain(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: -role weft N:ITERS,...", sidebyside.ErrUsage)
	}
	sizes, err := parseSpec(args[0])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), rankLimit)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	sidebyside.WarmCore()
	np := w.Comm().Size()
	dims, err := endpoint.DimsCreate(np, []int{0, 0})
	if err != nil {
		return err
	}
	// Not periodic: a grid of extent 2 would make the rank above and
	// below one rank, which MPI libraries pair differently (MPI 4 fixed
	// the order; older ones do not follow it).
	g, err := w.Comm().CartCreate(ctx, dims, nil)
	if err != nil {
		return err
	}
	defer g.Free()
	c, err := collectives.New(ctx, g.Comm())
	if err != nil {
		return err
	}
	defer c.Free()
	nb, _, err := g.Neighbors()
	if err != nil {
		return err
	}
	me := c.Rank()
	for i, s := range sizes {
		b, err := newBlock(s.n, me)
		if err != nil {
			return err
		}
		counts := []int{1, 1, 1, 1} // one row or one column each
		neighbor := func() error {
			return collectives.NeighborAlltoallw(ctx, c, g, b.buf, counts, b.sendAt(), b.types(), b.buf, counts, b.recvAt(), b.types())
		}
		p2p, free, err := persistent(g.Comm(), b, nb)
		if err != nil {
			return err
		}
		runs := []struct {
			name string
			f    func() error
		}{{"neighbor", neighbor}, {"p2p", p2p}}
		if i%2 == 1 {
			runs[0], runs[1] = runs[1], runs[0]
		}
		for _, r := range runs {
			clear(b.a[:b.n+2]) // the north ghost row, and the others below, refilled by the exchange
			for y := 1; y <= b.n; y++ {
				b.a[y*(b.n+2)] = 0
				b.a[y*(b.n+2)+b.n+1] = 0
			}
			clear(b.a[(b.n+1)*(b.n+2):])
			if err := r.f(); err != nil {
				return fmt.Errorf("%s, N=%d: %w", r.name, s.n, err)
			}
			if err := b.check(nb); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			sec, err := timed(ctx, c, r.f, sidebyside.WarmupFor(s.iters), s.iters)
			if err != nil {
				return fmt.Errorf("%s, N=%d: %w", r.name, s.n, err)
			}
			if me == 0 {
				fmt.Fprintf(stdout, "RESULT %s %d %.9g\n", r.name, s.n, sec)
			}
		}
		if err := free(); err != nil {
			return err
		}
	}
	if me == 0 {
		fmt.Fprintln(stdout, "CHECK ok")
	}
	return nil
}

// timed runs f warmup times, then iters times, and returns the slowest
// rank's seconds per call.
func timed(ctx context.Context, c *collectives.Coll, f func() error, warmup, iters int) (float64, error) {
	for range warmup {
		if err := f(); err != nil {
			return 0, err
		}
	}
	if err := collectives.Barrier(ctx, c); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for range iters {
		if err := f(); err != nil {
			return 0, err
		}
	}
	el := []float64{time.Since(t0).Seconds() / float64(iters)}
	out := make([]float64, 1)
	if err := collectives.Allreduce(ctx, c, el, out, collectives.Max[float64]()); err != nil {
		return 0, err
	}
	return out[0], nil
}

// persistent is the exchange by eight persistent typed requests (receives
// first), tagged by the direction the data travels, as examples/halo
// does; free frees them.
func persistent(comm *endpoint.Comm, b *block, nb []int) (exchange, free func() error, err error) {
	types, sat, rat := b.types(), b.sendAt(), b.recvAt()
	var ps []*endpoint.Persistent
	free = func() error {
		var errs []error
		for _, p := range ps {
			errs = append(errs, p.Free())
		}
		return errors.Join(errs...)
	}
	// block k's data travels towards neighbour k; a ghost edge k receives
	// what neighbour k sent travelling the other way (k^1).
	for k := range 4 {
		p, err := comm.RecvInit(b.buf[rat[k]:], 1, types[k], nb[k], 10+(k^1))
		if err != nil {
			return nil, nil, errors.Join(err, free())
		}
		ps = append(ps, p)
	}
	for k := range 4 {
		p, err := comm.SendInit(b.buf[sat[k]:], 1, types[k], nb[k], 10+k)
		if err != nil {
			return nil, nil, errors.Join(err, free())
		}
		ps = append(ps, p)
	}
	reqs := make([]*endpoint.Request, len(ps))
	exchange = func() error {
		if err := endpoint.StartAllInto(reqs, ps...); err != nil {
			return err
		}
		return endpoint.WaitAll(context.Background(), reqs...)
	}
	return exchange, free, nil
}
