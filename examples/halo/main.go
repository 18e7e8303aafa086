// Command halo is a two-dimensional Jacobi iteration distributed over a
// Cartesian grid of ranks: the classic halo exchange of a stencil code. It
// shows four parts of package endpoint working together:
//
//   - Cartesian topology: endpoint.DimsCreate picks a PY×PX process grid
//     for the job's N ranks, Comm.CartCreate builds it, and Cart.Shift names
//     each rank's north, south, west and east neighbours.
//   - Derived datatypes: a block is stored row-major, so its north and south
//     edges are contiguous rows, but its west and east edges are columns,
//     one float64 every row. The column is described once, as
//     ddt.Vector(ny, 1, nx+2, ddt.Float64), and sent and received in place:
//     the library packs and unpacks it.
//   - Persistent requests: the eight transfers that refresh a block's halo
//     are set up once with Comm.SendInit and Comm.RecvInit, then restarted
//     every iteration with endpoint.StartAllInto and endpoint.WaitAll: each
//     reuses its request, and a column its packing buffer, instead of
//     making them again every iteration.
//   - Or, with -neighbor, one neighbourhood collective per iteration:
//     collectives.NeighborAlltoallw sends the four edges and receives the
//     four ghost edges of the block in place, each described by its
//     count, type and byte offset, in the order of the grid's
//     neighbours (north, south, west, east).
//   - ProcNull borders: past a non-periodic edge of the process grid
//     Cart.Shift answers endpoint.ProcNull. Transfers with it complete at
//     once and move nothing, so the ghost cells there keep the fixed boundary
//     values they started with (a Dirichlet boundary), with no special case in
//     the loop. With -periodic the grid is a torus and every ghost cell comes
//     from a neighbour.
//
// The global grid has GY×GX cells. Each rank owns a block of about GY/PY ×
// GX/PX of them, stored with a frame of ghost cells around it: (ny+2)×(nx+2)
// float64 values, the ghost rows and columns holding copies of the
// neighbours' edges. Each iteration refreshes the ghosts, then replaces every
// cell by the mean of its four neighbours.
//
// The result is checked, not just printed: rank 0 gathers the blocks (each
// arrives as a ddt.Subarray of its sender's block and lands as a Subarray of
// the global grid), runs the same iterations serially on the whole grid and
// compares. Both apply the same arithmetic to the same values in the same
// order, so the results must be identical to the last bit; any difference
// is a bug in the exchange. Each rank then prints
//
//	rank R of N: block (py,px) of PYxPX, halo ok
//
// and rank 0 adds
//
//	halo: N ranks, GYxGX grid, K iterations, max |diff| 0 vs serial, sum S
//
// where S is the sum of the final grid. Run it under a launcher:
//
//	fabrun -n 6 halo                          # a 3x2 process grid
//	fabrun -n 4 halo -periodic -iters 500     # a 2x2 torus
//	mpiexec.hydra -n 4 halo -ny 200 -nx 300
//	halo                                      # one rank alone
//
// Flags: -ny and -nx (the global grid), -iters, -periodic, -neighbor (the
// exchange by a neighbourhood collective), -timeout (the whole run). Exit status: 0 when the result matches the serial run, 1 on
// any error or mismatch, 2 for bad flags.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "halo: %v (halo -h lists the flags)\n", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "halo:", err)
		os.Exit(1)
	}
}

// usageError is a bad flag value.
type usageError struct{ error }

// config is what the flags ask for.
type config struct {
	gy, gx   int // global grid, ghost frame not counted
	iters    int
	periodic bool
	neighbor bool
	timeout  time.Duration
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("halo", flag.ContinueOnError)
	fs.IntVar(&cfg.gy, "ny", 24, "rows of the global grid")
	fs.IntVar(&cfg.gx, "nx", 30, "columns of the global grid")
	fs.IntVar(&cfg.iters, "iters", 50, "Jacobi iterations")
	fs.BoolVar(&cfg.periodic, "periodic", false, "wrap the grid around in both dimensions (a torus) instead of fixed boundary values")
	fs.BoolVar(&cfg.neighbor, "neighbor", false, "exchange the halo with one neighbourhood collective (collectives.NeighborAlltoallw) instead of persistent requests")
	fs.DurationVar(&cfg.timeout, "timeout", 60*time.Second, "give up after this long")
	fs.SetOutput(io.Discard) // main reports errors, once
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
	case cfg.gy < 1 || cfg.gx < 1:
		return cfg, usageError{fmt.Errorf("grid %dx%d: want at least 1x1", cfg.gy, cfg.gx)}
	case cfg.gy > maxCells/cfg.gx:
		return cfg, usageError{fmt.Errorf("grid %dx%d: at most %d cells (rank 0 keeps whole copies of the grid for the check)", cfg.gy, cfg.gx, maxCells)}
	case cfg.iters < 0:
		return cfg, usageError{fmt.Errorf("-iters %d: want 0 or more", cfg.iters)}
	case cfg.timeout <= 0:
		return cfg, usageError{fmt.Errorf("-timeout %v: want a positive duration", cfg.timeout)}
	}
	return cfg, nil
}

// maxCells bounds the global grid: rank 0 holds three copies of it.
const maxCells = 1 << 26

// Tags name the direction a halo message travels in, so that two messages
// between the same pair of ranks cannot be confused: on a periodic grid
// two ranks wide, a rank's east and west neighbours are the same rank.
const (
	tagNorth = iota
	tagSouth
	tagWest
	tagEast
	tagGather
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

	// The process grid: dims[0] rows of dims[1] ranks, row-major, so that
	// rank r sits at (r/PX, r%PX).
	n := w.Comm().Size()
	dims, err := endpoint.DimsCreate(n, []int{0, 0})
	if err != nil {
		return err
	}
	if cfg.gy < dims[0] || cfg.gx < dims[1] {
		return fmt.Errorf("a %dx%d grid is too small for %d ranks as %dx%d blocks: every block needs a cell", cfg.gy, cfg.gx, n, dims[0], dims[1])
	}
	cart, err := w.Comm().CartCreate(ctx, dims, []bool{cfg.periodic, cfg.periodic})
	if err != nil {
		return err
	}
	defer cart.Free()
	c := cart.Comm()
	me := c.Rank()
	coords, err := cart.Coords(me)
	if err != nil {
		return err
	}
	b := blockOf(coords, dims, cfg.gy, cfg.gx)

	// Two copies of the block: each iteration reads one and writes the
	// other. Both start with the initial values, ghost frame included:
	// where the frame lies on a non-periodic border, those values are the
	// boundary condition and no message ever overwrites them.
	u := [2][]float64{b.initial(cfg.gy, cfg.gx), b.initial(cfg.gy, cfg.gx)}

	north, south, err := cart.Shift(0, 1) // the row above, the row below
	if err != nil {
		return err
	}
	west, east, err := cart.Shift(1, 1)
	if err != nil {
		return err
	}
	nb := neighbours{north: north, south: south, west: west, east: east}
	col, err := ddt.Vector(b.ny, 1, b.nx+2, ddt.Float64) // one column of the interior
	if err != nil {
		return err
	}
	if err := col.Commit(); err != nil {
		return err
	}
	var ex [2][]*endpoint.Persistent // the halo exchange of u[0] and of u[1]
	for k := range ex {
		if ex[k], err = exchange(c, u[k], b, col, nb); err != nil {
			return err
		}
		defer free(ex[k])
	}

	reqs := make([]*endpoint.Request, len(ex[0]))
	refresh := func(src int) error { // the persistent transfers
		if err := endpoint.StartAllInto(reqs, ex[src]...); err != nil {
			return err
		}
		return endpoint.WaitAll(ctx, reqs...)
	}
	if cfg.neighbor {
		coll, err := collectives.New(ctx, c)
		if err != nil {
			return err
		}
		defer coll.Free()
		refresh = neighborExchange(ctx, coll, cart, u, b, col)
	}
	for it := range cfg.iters {
		if err := ctx.Err(); err != nil { // a rank alone never waits
			return fmt.Errorf("iteration %d: %w", it, err)
		}
		src, dst := it%2, 1-it%2
		if err := refresh(src); err != nil {
			return fmt.Errorf("iteration %d: halo exchange: %w", it, err)
		}
		sweep(u[dst], u[src], b.ny, b.nx)
	}
	result := u[cfg.iters%2]

	worst, sum, err := check(ctx, cart, result, b, dims, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "rank %d of %d: block (%d,%d) of %dx%d, halo ok\n", me, n, coords[0], coords[1], dims[0], dims[1])
	if me == 0 {
		fmt.Fprintf(out, "halo: %d ranks, %dx%d grid, %d iterations, max |diff| %g vs serial, sum %v\n",
			n, cfg.gy, cfg.gx, cfg.iters, worst, sum)
	}
	return nil
}

// check compares result, this rank's block b after the run, with a serial
// run of the whole grid: rank 0 gathers the grid, repeats the iterations
// in one piece and tells every rank the largest difference in each block
// (there is no broadcast: an Allgather to which only rank 0 contributes
// does it). It returns the largest difference, which must be 0 else the
// error says where, and on rank 0 the sum of the final grid.
func check(ctx context.Context, cart *endpoint.Cart, result []float64, b block, dims []int, cfg config) (worst, sum float64, err error) {
	c := cart.Comm()
	me, n := c.Rank(), c.Size()
	global, err := gather(ctx, cart, result, b, dims, cfg.gy, cfg.gx)
	if err != nil {
		return 0, 0, err
	}
	var verdict []byte // rank 0: max |diff| of each rank's block, 8 bytes each
	if me == 0 {
		ref, err := serial(ctx, cfg.gy, cfg.gx, cfg.iters, cfg.periodic)
		if err != nil {
			return 0, 0, err
		}
		for r := range n {
			rc, err := cart.Coords(r)
			if err != nil {
				return 0, 0, err
			}
			d := maxDiff(global, ref, blockOf(rc, dims, cfg.gy, cfg.gx), cfg.gx)
			verdict = binary.LittleEndian.AppendUint64(verdict, math.Float64bits(d))
		}
		sum = interiorSum(global, cfg.gy, cfg.gx)
	}
	all, err := c.Allgather(ctx, verdict)
	if err != nil {
		return 0, 0, err
	}
	if len(all[0]) != 8*n {
		return 0, 0, fmt.Errorf("verdict of %d bytes from rank 0, want %d", len(all[0]), 8*n)
	}
	for r := range n {
		d := math.Float64frombits(binary.LittleEndian.Uint64(all[0][8*r:]))
		if r == me && d != 0 {
			return d, sum, fmt.Errorf("rank %d: its block (rows %d..%d, columns %d..%d) differs from the serial run: max |diff| %g",
				me, b.y0, b.y0+b.ny-1, b.x0, b.x0+b.nx-1, d)
		}
		worst = max(worst, d)
	}
	if worst != 0 {
		return worst, sum, fmt.Errorf("rank %d: the grid differs from the serial run: max |diff| %g", me, worst)
	}
	return 0, sum, nil
}

// block is one rank's part of the global grid: ny×nx cells whose first is
// global cell (y0, x0), counted from 0 without the ghost frame.
type block struct {
	ny, nx, y0, x0 int
}

// blockOf returns the block at coords of a dims process grid over a gy×gx
// grid: the rows are split as evenly as possible (the first gy%PY block
// rows get one more), and likewise the columns.
func blockOf(coords, dims []int, gy, gx int) block {
	y0, ny := split(gy, dims[0], coords[0])
	x0, nx := split(gx, dims[1], coords[1])
	return block{ny: ny, nx: nx, y0: y0, x0: x0}
}

// split returns the first index and length of part k of n items in p parts.
func split(n, p, k int) (first, length int) {
	q, r := n/p, n%p
	return k*q + min(k, r), q + btoi(k < r)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// at returns the index of cell (i, j) of the block with its ghost frame:
// row i of 0..ny+1, column j of 0..nx+1, the interior at 1..ny, 1..nx.
func (b block) at(i, j int) int { return i*(b.nx+2) + j }

// initial returns the block, ghost frame included, holding its part of the
// starting grid (see startValue).
func (b block) initial(gy, gx int) []float64 {
	u := make([]float64, (b.ny+2)*(b.nx+2))
	for i := range b.ny + 2 {
		for j := range b.nx + 2 {
			u[b.at(i, j)] = startValue(b.y0+i, b.x0+j, gy, gx)
		}
	}
	return u
}

// startValue is the starting value of cell (I, J) of the global grid with
// its ghost frame (0..gy+1, 0..gx+1). The frame holds the fixed boundary
// values: 1 along the north edge, 0 along the others. The interior starts
// from irregular values in [0, 1), so that a cell taken from the wrong
// place changes the result.
func startValue(I, J, gy, gx int) float64 {
	switch {
	case I == 0:
		return 1
	case I == gy+1 || J == 0 || J == gx+1:
		return 0
	}
	return float64((I*7919+J*104729)%1000) / 1000
}

// neighbours are the ranks next to this one (ProcNull past a non-periodic
// border).
type neighbours struct{ north, south, west, east int }

// exchange sets up the persistent transfers that refresh the ghost frame
// of u, the block b: receive each ghost edge from the neighbour on that side
// and send each edge of the interior to the neighbour beyond it. A
// transfer's buffer starts at the first element it moves. The receives
// come first so that they are posted before the neighbours' messages
// arrive.
func exchange(c *endpoint.Comm, u []float64, b block, col *ddt.Type, nb neighbours) ([]*endpoint.Persistent, error) {
	buf := endpoint.AsBytes(u)
	from := func(i, j int) []byte { return buf[8*b.at(i, j):] }
	row := ddt.Float64 // a row is nx consecutive float64: no derived type needed
	type op struct {
		send     bool
		buf      []byte
		count    int
		t        *ddt.Type
		peer, tg int
	}
	ops := []op{
		{false, from(0, 1), b.nx, row, nb.north, tagSouth},      // north ghost row: the north neighbour's last row, travelling south
		{false, from(b.ny+1, 1), b.nx, row, nb.south, tagNorth}, // south ghost row
		{false, from(1, 0), 1, col, nb.west, tagEast},           // west ghost column
		{false, from(1, b.nx+1), 1, col, nb.east, tagWest},      // east ghost column
		{true, from(1, 1), b.nx, row, nb.north, tagNorth},       // first row, to the north
		{true, from(b.ny, 1), b.nx, row, nb.south, tagSouth},    // last row, to the south
		{true, from(1, 1), 1, col, nb.west, tagWest},            // first column, to the west
		{true, from(1, b.nx), 1, col, nb.east, tagEast},         // last column, to the east
	}
	ps := make([]*endpoint.Persistent, 0, len(ops))
	for _, o := range ops {
		var p *endpoint.Persistent
		var err error
		if o.send {
			p, err = c.SendInit(o.buf, o.count, o.t, o.peer, o.tg)
		} else {
			p, err = c.RecvInit(o.buf, o.count, o.t, o.peer, o.tg)
		}
		if err != nil {
			free(ps)
			return nil, fmt.Errorf("halo exchange: %w", err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// neighborExchange returns the halo exchange of u[src] by one
// neighbourhood collective: block k goes to and comes from the grid's k-th
// neighbour (north, south, west, east: Cart.Neighbors), each edge
// sent from the interior and each ghost edge received in place, with
// displacements in bytes from the start of the block.
func neighborExchange(ctx context.Context, coll *collectives.Coll, cart *endpoint.Cart, u [2][]float64, b block, col *ddt.Type) func(src int) error {
	at := func(i, j int) int { return 8 * b.at(i, j) }
	counts := []int{b.nx, b.nx, 1, 1}
	types := []*ddt.Type{ddt.Float64, ddt.Float64, col, col}
	sendAt := []int{at(1, 1), at(b.ny, 1), at(1, 1), at(1, b.nx)}     // first and last row, first and last column
	recvAt := []int{at(0, 1), at(b.ny+1, 1), at(1, 0), at(1, b.nx+1)} // the ghost edges
	return func(src int) error {
		buf := endpoint.AsBytes(u[src])
		return collectives.NeighborAlltoallw(ctx, coll, cart, buf, counts, sendAt, types, buf, counts, recvAt, types)
	}
}

func free(ps []*endpoint.Persistent) {
	for _, p := range ps {
		p.Free()
	}
}

// sweep writes into dst the Jacobi update of src's interior: each cell
// becomes the mean of its four neighbours in src. Both are ny×nx blocks
// with a ghost frame; dst's frame is left alone.
func sweep(dst, src []float64, ny, nx int) {
	w := nx + 2
	for i := 1; i <= ny; i++ {
		for j := 1; j <= nx; j++ {
			k := i*w + j
			dst[k] = 0.25 * ((src[k-w] + src[k+w]) + (src[k-1] + src[k+1]))
		}
	}
}

// serial runs iters iterations on the whole gy×gx grid in one piece and
// returns it, ghost frame included: the reference the distributed run must
// match. It gives up when ctx ends.
func serial(ctx context.Context, gy, gx, iters int, periodic bool) ([]float64, error) {
	g := block{ny: gy, nx: gx}
	u := [2][]float64{g.initial(gy, gx), g.initial(gy, gx)}
	for it := range iters {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("serial run, iteration %d: %w", it, err)
		}
		src, dst := u[it%2], u[1-it%2]
		if periodic {
			wrap(src, g)
		}
		sweep(dst, src, gy, gx)
	}
	return u[iters%2], nil
}

// wrap fills the ghost frame of u, the block g, from the opposite edges of
// its interior (corners are never read, so they are left alone).
func wrap(u []float64, g block) {
	for j := 1; j <= g.nx; j++ {
		u[g.at(0, j)] = u[g.at(g.ny, j)]
		u[g.at(g.ny+1, j)] = u[g.at(1, j)]
	}
	for i := 1; i <= g.ny; i++ {
		u[g.at(i, 0)] = u[g.at(i, g.nx)]
		u[g.at(i, g.nx+1)] = u[g.at(i, 1)]
	}
}

// gather collects every rank's interior into a gy×gx grid (with its ghost
// frame, left zero) on rank 0 and returns it there; other ranks get nil.
// A block leaves as the interior of its sender's ghosted block and lands
// at its place in the global grid: two different subarray types, one
// packed stream between them.
func gather(ctx context.Context, cart *endpoint.Cart, u []float64, b block, dims []int, gy, gx int) ([]float64, error) {
	c := cart.Comm()
	var global []float64
	var reqs []*endpoint.Request
	if c.Rank() == 0 {
		global = make([]float64, (gy+2)*(gx+2))
		for r := range c.Size() {
			rc, err := cart.Coords(r)
			if err != nil {
				return nil, err
			}
			rb := blockOf(rc, dims, gy, gx)
			t, err := subarray([]int{gy + 2, gx + 2}, []int{rb.ny, rb.nx}, []int{rb.y0 + 1, rb.x0 + 1})
			if err != nil {
				return nil, err
			}
			req, err := c.IrecvTyped(endpoint.AsBytes(global), 1, t, r, tagGather)
			if err != nil {
				return nil, fmt.Errorf("gather from rank %d: %w", r, err)
			}
			reqs = append(reqs, req)
		}
	}
	mine, err := subarray([]int{b.ny + 2, b.nx + 2}, []int{b.ny, b.nx}, []int{1, 1})
	if err != nil {
		return nil, err
	}
	if err := c.SendTyped(ctx, endpoint.AsBytes(u), 1, mine, 0, tagGather); err != nil {
		return nil, fmt.Errorf("gather: send to rank 0: %w", err)
	}
	if err := endpoint.WaitAll(ctx, reqs...); err != nil {
		return nil, fmt.Errorf("gather: %w", err)
	}
	return global, nil
}

// subarray returns the committed type of a subsizes part at starts of a
// row-major sizes array of float64.
func subarray(sizes, subsizes, starts []int) (*ddt.Type, error) {
	t, err := ddt.Subarray(sizes, subsizes, starts, ddt.OrderC, ddt.Float64)
	if err != nil {
		return nil, err
	}
	return t, t.Commit()
}

// maxDiff returns the largest |got-want| over block b's cells of two
// global grids gx wide (ghost frames included); NaN counts as +Inf.
func maxDiff(got, want []float64, b block, gx int) float64 {
	g := block{nx: gx}
	m := 0.0
	for i := 1; i <= b.ny; i++ {
		for j := 1; j <= b.nx; j++ {
			k := g.at(b.y0+i, b.x0+j)
			d := math.Abs(got[k] - want[k])
			if math.IsNaN(d) {
				d = math.Inf(1)
			}
			m = max(m, d)
		}
	}
	return m
}

// interiorSum returns the sum of the interior cells of a gy×gx global
// grid, row by row.
func interiorSum(u []float64, gy, gx int) float64 {
	g := block{ny: gy, nx: gx}
	s := 0.0
	for i := 1; i <= gy; i++ {
		for j := 1; j <= gx; j++ {
			s += u[g.at(i, j)]
		}
	}
	return s
}
