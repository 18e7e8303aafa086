package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// neighborGrids are the Cartesian grids of the neighbourhood tests: every
// extent a wrapping dimension can repeat a neighbour with (1: this rank
// itself, 2: the same rank below and above), ends of non-wrapping ones,
// and 1 to 3 dimensions; grids smaller than the communicator leave ranks
// out.
var neighborGrids = []struct {
	dims    []int
	periods []bool
}{
	{[]int{1}, []bool{true}},
	{[]int{2}, []bool{true}},
	{[]int{2}, []bool{false}},
	{[]int{3}, []bool{true}},
	{[]int{4}, []bool{false}},
	{[]int{2, 2}, []bool{true, true}},
	{[]int{2, 2}, []bool{false, true}},
	{[]int{1, 3}, []bool{true, false}},
	{[]int{1, 2, 2}, []bool{true, true, false}},
}

// nval is the value rank r puts at element e of its block k (k = -1 for
// NeighborAllgather's one block).
func nval(r, k, e int) float64 { return float64(r*10000 + (k+1)*100 + e) }

const nsentinel = -1.5

// neighborGridsRun counts the grids neighborBattery ran, over all ranks.
var neighborGridsRun atomic.Int64

// neighborBattery runs NeighborAllgather, NeighborAlltoall and
// NeighborAlltoallw on every grid of neighborGrids that fits c's
// communicator, each result checked against the neighbourhood's
// definition: block 2i comes from the rank below in dimension i and holds
// what that rank sent up, block 2i+1 from the rank above, what it sent
// down; blocks of missing neighbours stay untouched.
func neighborBattery(ctx context.Context, world *C.Coll, nonblocking bool) error {
	ran := 0
	defer func() { neighborGridsRun.Add(int64(ran)) }()
	for _, gr := range neighborGrids {
		n := 1
		for _, d := range gr.dims {
			n *= d
		}
		if n > world.Size() {
			continue
		}
		g, err := world.Comm().CartCreate(ctx, gr.dims, gr.periods)
		if err != nil {
			return fmt.Errorf("grid %v %v: %w", gr.dims, gr.periods, err)
		}
		if g == nil {
			continue // outside the grid
		}
		ran++
		if err := neighborGrid(ctx, g, nonblocking); err != nil {
			return fmt.Errorf("grid %v %v, rank %d: %w", gr.dims, gr.periods, g.Comm().Rank(), err)
		}
		if err := g.Free(); err != nil {
			return err
		}
	}
	return nil
}

func neighborGrid(ctx context.Context, g *endpoint.Cart, nonblocking bool) (err error) {
	c, err := C.New(ctx, g.Comm())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Free()) }()
	nb, dst, err := g.Neighbors()
	if err != nil {
		return err
	}
	if len(nb) != 2*len(g.Dims()) || !slices.Equal(nb, dst) {
		return fmt.Errorf("neighbours %v and %v for %d dimensions", nb, dst, len(g.Dims()))
	}
	me := g.Comm().Rank()
	for _, k := range []int{0, 1, 5} { // elements per block
		// NeighborAllgather
		send := make([]float64, k)
		for e := range send {
			send[e] = nval(me, -1, e)
		}
		recv := make([]float64, len(nb)*k)
		for i := range recv {
			recv[i] = nsentinel
		}
		if err := wait(ctx, nonblocking, func() error { return C.NeighborAllgather(ctx, c, g, send, recv) },
			func() (*C.Request, error) { return C.IneighborAllgather(c, g, send, recv) }); err != nil {
			return fmt.Errorf("NeighborAllgather of %d: %w", k, err)
		}
		for j, p := range nb {
			for e := range k {
				want := nsentinel
				if p != endpoint.ProcNull {
					want = nval(p, -1, e)
				}
				if got := recv[j*k+e]; got != want {
					return fmt.Errorf("NeighborAllgather of %d: block %d (neighbour %d) [%d] = %v, want %v", k, j, p, e, got, want)
				}
			}
		}
		// NeighborAlltoall
		send = make([]float64, len(nb)*k)
		for j := range nb {
			for e := range k {
				send[j*k+e] = nval(me, j, e)
			}
		}
		for i := range recv {
			recv[i] = nsentinel
		}
		if err := wait(ctx, nonblocking, func() error { return C.NeighborAlltoall(ctx, c, g, send, recv) },
			func() (*C.Request, error) { return C.IneighborAlltoall(c, g, send, recv) }); err != nil {
			return fmt.Errorf("NeighborAlltoall of %d: %w", k, err)
		}
		for j, p := range nb {
			sent := j ^ 1 // from below: what it sent up (its block 2i+1); from above: down
			for e := range k {
				want := nsentinel
				if p != endpoint.ProcNull {
					want = nval(p, sent, e)
				}
				if got := recv[j*k+e]; got != want {
					return fmt.Errorf("NeighborAlltoall of %d: block %d (neighbour %d) [%d] = %v, want %v", k, j, p, e, got, want)
				}
			}
		}
		if err := neighborVGrid(ctx, c, g, nb, k, nonblocking); err != nil {
			return err
		}
	}
	if len(g.Dims()) <= 2 {
		if err := haloExchange(ctx, c, g, nb, nonblocking); err != nil {
			return fmt.Errorf("NeighborAlltoallw halo: %w", err)
		}
	}
	// Errors: a wrong block layout, a handle over another communicator.
	if err := C.NeighborAlltoall(ctx, c, g, make([]float64, len(nb)+1), make([]float64, len(nb))); !errors.Is(err, C.ErrInvalid) {
		return fmt.Errorf("NeighborAlltoall with unequal blocks: %v, want ErrInvalid", err)
	}
	return nil
}

// neighborVGrid runs NeighborAllgatherv and NeighborAlltoallv with blocks
// of sizes k to k+2 that depend on the sending rank and block, laid out
// with a gap before each: every received block is checked, the gaps and
// the blocks of missing neighbours stay untouched.
func neighborVGrid(ctx context.Context, c *C.Coll, g *endpoint.Cart, nb []int, k int, nonblocking bool) error {
	me := g.Comm().Rank()
	size := func(r, j int) int { // elements rank r sends as block j (j -1: the allgather's)
		if r == endpoint.ProcNull {
			return 0
		}
		return k + (r+j+3)%3
	}
	layout := func(n func(j int) int) (counts, displs []int, total int) {
		for j := range nb {
			counts, displs = append(counts, n(j)), append(displs, total+1)
			total += n(j) + 1
		}
		return counts, displs, total
	}
	check := func(what string, recv []float64, rc, rd []int, sent func(j int) int) error {
		mark := make([]bool, len(recv))
		for j, p := range nb {
			for e := range rc[j] {
				mark[rd[j]+e] = true
				want := nsentinel
				if p != endpoint.ProcNull {
					want = nval(p, sent(j), e)
				}
				if got := recv[rd[j]+e]; got != want {
					return fmt.Errorf("%s (k %d): block %d (neighbour %d) [%d] = %v, want %v", what, k, j, p, e, got, want)
				}
			}
		}
		for i, m := range mark {
			if !m && recv[i] != nsentinel {
				return fmt.Errorf("%s (k %d): element %d outside every block written", what, k, i)
			}
		}
		return nil
	}
	fresh := func(n int) []float64 {
		b := make([]float64, n)
		for i := range b {
			b[i] = nsentinel
		}
		return b
	}
	// NeighborAllgatherv: rank r sends size(r, -1) elements.
	send := make([]float64, size(me, -1))
	for e := range send {
		send[e] = nval(me, -1, e)
	}
	rc, rd, total := layout(func(j int) int { return size(nb[j], -1) })
	recv := fresh(total)
	if err := wait(ctx, nonblocking, func() error { return C.NeighborAllgatherv(ctx, c, g, send, recv, rc, rd) },
		func() (*C.Request, error) { return C.IneighborAllgatherv(c, g, send, recv, rc, rd) }); err != nil {
		return fmt.Errorf("NeighborAllgatherv (k %d): %w", k, err)
	}
	if err := check("NeighborAllgatherv", recv, rc, rd, func(int) int { return -1 }); err != nil {
		return err
	}
	// NeighborAlltoallv: block j of rank r holds size(r, j) elements; the
	// block from below is what that rank sent up (its j^1), as above.
	sc, sd, stotal := layout(func(j int) int { return size(me, j) })
	send = fresh(stotal)
	for j := range nb {
		for e := range sc[j] {
			send[sd[j]+e] = nval(me, j, e)
		}
	}
	rc, rd, total = layout(func(j int) int { return size(nb[j], j^1) })
	recv = fresh(total)
	if err := wait(ctx, nonblocking, func() error { return C.NeighborAlltoallv(ctx, c, g, send, sc, sd, recv, rc, rd) },
		func() (*C.Request, error) { return C.IneighborAlltoallv(c, g, send, sc, sd, recv, rc, rd) }); err != nil {
		return fmt.Errorf("NeighborAlltoallv (k %d): %w", k, err)
	}
	return check("NeighborAlltoallv", recv, rc, rd, func(j int) int { return j ^ 1 })
}

// haloExchange is a 2D halo exchange by NeighborAlltoallw over the grid
// (a 1D grid is a 2D one with one column of subdomains): each rank owns
// ny × nx interior cells of a (ny+2) × (nx+2) array of float64 with one
// ghost layer; rows travel as contiguous blocks, columns as vectors, in
// place on both sides.
func haloExchange(ctx context.Context, c *C.Coll, g *endpoint.Cart, nb []int, nonblocking bool) error {
	const ny, nx = 5, 7
	const w = nx + 2
	me := g.Comm().Rank()
	a := make([]float64, (ny+2)*w)
	for i := range a {
		a[i] = nsentinel
	}
	for y := 1; y <= ny; y++ {
		for x := 1; x <= nx; x++ {
			a[y*w+x] = nval(me, y, x)
		}
	}
	row, err := ddt.Contiguous(nx, ddt.Float64)
	if err != nil {
		return err
	}
	col, err := ddt.Vector(ny, 1, w, ddt.Float64)
	if err != nil {
		return err
	}
	for _, t := range []*ddt.Type{row, col} {
		if err := t.Commit(); err != nil {
			return err
		}
	}
	at := func(y, x int) int { return 8 * (y*w + x) }
	// dimension 0 moves rows (below: first interior row, above: last);
	// dimension 1, where there is one, moves columns
	types := []*ddt.Type{row, row, col, col}
	sdispls := []int{at(1, 1), at(ny, 1), at(1, 1), at(1, nx)}
	rdispls := []int{at(0, 1), at(ny+1, 1), at(1, 0), at(1, nx+1)}
	nn := len(nb)
	counts := make([]int, nn)
	for i := range counts {
		counts[i] = 1
	}
	// send and recv are the same array: its interior faces and its
	// ghost layer, in place.
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), 8*len(a))
	if err := wait(ctx, nonblocking, func() error {
		return C.NeighborAlltoallw(ctx, c, g, buf, counts, sdispls[:nn], types[:nn], buf, counts, rdispls[:nn], types[:nn])
	}, func() (*C.Request, error) {
		return C.IneighborAlltoallw(c, g, buf, counts, sdispls[:nn], types[:nn], buf, counts, rdispls[:nn], types[:nn])
	}); err != nil {
		return err
	}
	for j, p := range nb {
		for i := 0; i < map[bool]int{true: nx, false: ny}[j < 2]; i++ {
			var y, x, sy, sx int // ghost cell, and the cell of p it copies
			switch j {
			case 0:
				y, x, sy, sx = 0, 1+i, ny, 1+i
			case 1:
				y, x, sy, sx = ny+1, 1+i, 1, 1+i
			case 2:
				y, x, sy, sx = 1+i, 0, 1+i, nx
			case 3:
				y, x, sy, sx = 1+i, nx+1, 1+i, 1
			}
			want := nsentinel
			if p != endpoint.ProcNull {
				want = nval(p, sy, sx)
			}
			if got := a[y*w+x]; got != want {
				return fmt.Errorf("ghost cell (%d, %d) from neighbour %d (block %d): %v, want %v", y, x, p, j, got, want)
			}
		}
	}
	return nil
}

// wait runs the blocking form, or starts the nonblocking one and waits
// for it.
func wait(ctx context.Context, nonblocking bool, blocking func() error, start func() (*C.Request, error)) error {
	if !nonblocking {
		return blocking()
	}
	r, err := start()
	if err != nil {
		return err
	}
	return r.Wait(ctx)
}

func TestNeighborHandles(t *testing.T) {
	for _, np := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("n%d", np), func(t *testing.T) {
			eps := handles(t, np)
			ctx := eptest.Ctx(t, 60*time.Second)
			before := neighborGridsRun.Load()
			runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
				return errors.Join(neighborBattery(ctx, c, false), neighborBattery(ctx, c, true))
			})
			t.Logf("%d grids run by %d handles", neighborGridsRun.Load()-before, np)
		})
	}
}

// TestNeighborProcs: the battery over 4 processes on the node transport
// and 2 over tcp (halo blocks by libfabric's typed paths).
func TestNeighborProcs(t *testing.T) {
	for _, tc := range []struct {
		prov string
		np   int
	}{{"native", 4}, {"tcp;ofi_rxm", 2}} {
		t.Run(fmt.Sprintf("%s/n%d", provName(tc.prov), tc.np), func(t *testing.T) {
			if tc.prov != "native" {
				testenv.Short(t, "the neighbourhood collectives over tcp")
			}
			if launchtest.RunOn(t, tc.np, tc.prov, 60*time.Second) {
				return
			}
			_, ctx, c := worldColl(t)
			for _, nb := range []bool{false, true} {
				if err := neighborBattery(ctx, c, nb); err != nil {
					t.Fatalf("nonblocking=%v: %v", nb, err)
				}
			}
			if err := graphBattery(ctx, c); err != nil {
				t.Fatalf("graph: %v", err)
			}
			if err := c.Free(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNeighborErrors: bad arguments fail the call with ErrInvalid on
// every rank (each check on a handle of its own: a failed call leaves its
// handle unusable).
// onGrid runs f with a handle over g's communicator, freed after.
func onGrid(ctx context.Context, g *endpoint.Cart, f func(gc *C.Coll) error) error {
	gc, err := C.New(ctx, g.Comm())
	if err != nil {
		return err
	}
	defer gc.Free()
	return f(gc)
}

func TestNeighborErrors(t *testing.T) {
	eps := handles(t, 2)
	ctx := eptest.Ctx(t, 30*time.Second)
	checks := []struct {
		name string
		call func(ctx context.Context, c *C.Coll, g *endpoint.Cart) error
	}{
		{"a handle over another communicator", func(ctx context.Context, c *C.Coll, g *endpoint.Cart) error {
			return C.NeighborAlltoall(ctx, c, g, make([]int32, 2), make([]int32, 2))
		}},
		{"a nil grid", func(ctx context.Context, c *C.Coll, _ *endpoint.Cart) error {
			return C.NeighborAllgather(ctx, c, nil, make([]int32, 1), make([]int32, 2))
		}},
		{"a receive layout over a send layout", func(ctx context.Context, c *C.Coll, g *endpoint.Cart) error {
			col, err := ddt.Vector(4, 1, 4, ddt.Int32)
			if err == nil {
				err = col.Commit()
			}
			if err != nil {
				return err
			}
			return onGrid(ctx, g, func(gc *C.Coll) error {
				b := make([]byte, 64)
				one, ts := []int{1, 1}, []*ddt.Type{col, col}
				// receive column 1 from below and column 2 from above; send
				// columns 0 and 1: column 1 is read and written
				return C.NeighborAlltoallw(ctx, gc, g, b, one, []int{0, 4}, ts, b, one, []int{4, 8}, ts)
			})
		}},
		{"two receive layouts over the same bytes", func(ctx context.Context, c *C.Coll, g *endpoint.Cart) error {
			return onGrid(ctx, g, func(gc *C.Coll) error {
				b := make([]byte, 64)
				one, ts := []int{4, 4}, []*ddt.Type{ddt.Int32, ddt.Int32}
				return C.NeighborAlltoallw(ctx, gc, g, b, one, []int{0, 16}, ts, b, one, []int{32, 40}, ts)
			})
		}},
		{"v-form receive blocks that overlap", func(ctx context.Context, c *C.Coll, g *endpoint.Cart) error {
			return onGrid(ctx, g, func(gc *C.Coll) error {
				return C.NeighborAllgatherv(ctx, gc, g, make([]int32, 2), make([]int32, 6), []int{3, 3}, []int{0, 2})
			})
		}},
		{"v-form counts for three neighbours of two", func(ctx context.Context, c *C.Coll, g *endpoint.Cart) error {
			return onGrid(ctx, g, func(gc *C.Coll) error {
				return C.NeighborAlltoallv(ctx, gc, g, make([]int32, 4), []int{1, 1, 1}, []int{0, 1, 2}, make([]int32, 4), []int{1, 1}, []int{0, 1})
			})
		}},
		{"a v-form block past its buffer", func(ctx context.Context, c *C.Coll, g *endpoint.Cart) error {
			return onGrid(ctx, g, func(gc *C.Coll) error {
				return C.NeighborAlltoallv(ctx, gc, g, make([]int32, 4), []int{2, 2}, []int{0, 3}, make([]int32, 4), []int{2, 2}, []int{0, 2})
			})
		}},
		{"NeighborAlltoallv without send counts", func(ctx context.Context, c *C.Coll, g *endpoint.Cart) error {
			return onGrid(ctx, g, func(gc *C.Coll) error {
				return C.NeighborAlltoallv(ctx, gc, g, make([]int32, 4), nil, nil, make([]int32, 4), []int{2, 2}, []int{0, 2})
			})
		}},
	}
	for _, ck := range checks {
		runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
			g, err := c.Comm().CartCreate(ctx, []int{2}, []bool{true})
			if err != nil {
				return err
			}
			defer g.Free()
			// c is over the world, not over the grid's communicator
			if err := ck.call(ctx, c, g); !errors.Is(err, C.ErrInvalid) {
				return fmt.Errorf("%s: %v, want ErrInvalid", ck.name, err)
			}
			return nil
		})
	}
	if _, _, err := (*endpoint.Cart)(nil).Neighbors(); !errors.Is(err, C.ErrInvalid) {
		t.Errorf("Neighbors of a nil Cart: %v, want ErrInvalid", err)
	}
}

// TestAbortOfLaterCall: a rank that has done its part of a call and then
// fails the next one (a bad argument) does not fail the first call on
// the ranks still in it; they fail the next one where it needs the rank
// that gave up. Grid 0–1–2: rank 0 needs only rank 1, which waits for the
// late rank 2 when rank 0's abort notice arrives; rank 2's second call
// needs only rank 1 and may complete.
func TestAbortOfLaterCall(t *testing.T) {
	eps := handles(t, 3)
	ctx := eptest.Ctx(t, 30*time.Second)
	runHandles(t, ctx, eps, nil, func(ctx context.Context, world *C.Coll) error {
		return withGrid(ctx, world, []int{3}, func(c *C.Coll, g *endpoint.Cart) error {
			me := c.Rank()
			if me == 2 {
				time.Sleep(200 * time.Millisecond)
			}
			recv := make([]int64, 2)
			if err := C.NeighborAllgather(ctx, c, g, []int64{int64(me)}, recv); err != nil {
				return fmt.Errorf("the first call: %w", err)
			}
			var err error
			if me == 0 {
				err = C.NeighborAllgather(ctx, c, g, []int64{0}, make([]int64, 3)) // wrong length
			} else {
				err = C.NeighborAllgather(ctx, c, g, []int64{int64(me)}, recv)
			}
			if me == 2 && err == nil {
				return nil // its only neighbour, rank 1, did its part
			}
			if !errors.Is(err, C.ErrInvalid) {
				return fmt.Errorf("the second call: %v, want ErrInvalid", err)
			}
			return nil
		})
	})
}

// withGrid runs body over a grid of dims (not periodic) made from
// world's communicator and a handle made over the grid, and frees both
// (a handle that a failed call left unusable among them).
func withGrid(ctx context.Context, world *C.Coll, dims []int, body func(c *C.Coll, g *endpoint.Cart) error) error {
	g, err := world.Comm().CartCreate(ctx, dims, nil)
	if err != nil {
		return err
	}
	defer g.Free()
	c, err := C.New(ctx, g.Comm())
	if err != nil {
		return err
	}
	defer c.Free()
	return body(c, g)
}

// graphLists is the distributed graph of TestNeighborGraph: each rank
// sends to the next rank twice, to itself and to the rank three on, and
// lists its sources in descending rank order (an order of its own, not
// its senders').
func graphLists(me, p int) (src, dst []int) {
	dests := func(r int) []int { return []int{(r + 1) % p, r, (r + 1) % p, (r + 3) % p} }
	for s := p - 1; s >= 0; s-- {
		for _, d := range dests(s) {
			if d == me {
				src = append(src, s)
			}
		}
	}
	return src, dests(me)
}

// graphSent is the send block of rank s that arrives as the q-th block
// from s in rank me's sources (edges repeated pair up in list order).
func graphSent(s, me, q, p int) int {
	_, dst := graphLists(s, p)
	for k, d := range dst {
		if d == me {
			if q == 0 {
				return k
			}
			q--
		}
	}
	return -1
}

// graphBattery runs NeighborAlltoall and NeighborAllgather, blocking and
// nonblocking, over the graph of graphLists on world's communicator and
// checks every block.
func graphBattery(ctx context.Context, world *C.Coll) (err error) {
	me, p := world.Rank(), world.Size()
	src, dst := graphLists(me, p)
	g, err := world.Comm().GraphCreate(ctx, src, dst)
	if err != nil {
		return err
	}
	defer g.Free()
	c, err := C.New(ctx, g.Comm())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Free()) }()
	for _, nonblocking := range []bool{false, true} {
		const k = 3
		send := make([]float64, len(dst)*k)
		for j := range dst {
			for e := range k {
				send[j*k+e] = nval(me, j, e)
			}
		}
		recv := make([]float64, len(src)*k)
		if err := wait(ctx, nonblocking, func() error { return C.NeighborAlltoall(ctx, c, g, send, recv) },
			func() (*C.Request, error) { return C.IneighborAlltoall(c, g, send, recv) }); err != nil {
			return fmt.Errorf("NeighborAlltoall: %w", err)
		}
		gathered := make([]float64, len(src)*k)
		if err := wait(ctx, nonblocking, func() error { return C.NeighborAllgather(ctx, c, g, send[:k], gathered) },
			func() (*C.Request, error) { return C.IneighborAllgather(c, g, send[:k], gathered) }); err != nil {
			return fmt.Errorf("NeighborAllgather: %w", err)
		}
		seen := map[int]int{}
		for j, s := range src {
			q := seen[s]
			seen[s]++
			blk := graphSent(s, me, q, p)
			for e := range k {
				if got, want := recv[j*k+e], nval(s, blk, e); got != want {
					return fmt.Errorf("NeighborAlltoall, nonblocking %v: block %d (source %d, edge %d) [%d] = %v, want %v", nonblocking, j, s, q, e, got, want)
				}
				if got, want := gathered[j*k+e], nval(s, 0, e); got != want {
					return fmt.Errorf("NeighborAllgather, nonblocking %v: block %d (source %d) [%d] = %v, want %v", nonblocking, j, s, e, got, want)
				}
			}
		}
	}
	return nil
}

// TestNeighborGraph: the neighbourhood collectives over a distributed
// graph with self-loops and repeated edges, blocking and nonblocking,
// over 1 to 5 handles: block j comes from source j, and the q-th block
// from one source is what it sent on its q-th edge to this rank.
func TestNeighborGraph(t *testing.T) {
	for _, np := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("n%d", np), func(t *testing.T) {
			eps := handles(t, np)
			ctx := eptest.Ctx(t, 30*time.Second)
			runHandles(t, ctx, eps, nil, graphBattery)
		})
	}
}

// TestNeighborAlltoallwReuse: a NeighborAlltoallw repeated with the same
// arguments reuses their layouts; changed displacements (in the same
// slices), and a change that makes the layouts overlap, are seen.
func TestNeighborAlltoallwReuse(t *testing.T) {
	eps := handles(t, 2)
	ctx := eptest.Ctx(t, 30*time.Second)
	runHandles(t, ctx, eps, nil, func(ctx context.Context, world *C.Coll) error {
		return withGrid(ctx, world, []int{2}, func(c *C.Coll, g *endpoint.Cart) error {
			me := c.Rank()
			a := make([]int32, 16)
			buf := endpoint.AsBytes(a)
			counts, types := []int{2, 2}, []*ddt.Type{ddt.Int32, ddt.Int32}
			sd, rd := []int{0, 8}, []int{32, 48}
			for round, at := range []int{32, 40, 32} {
				clear(a)
				a[0], a[1], a[2], a[3] = int32(10*me+1), int32(10*me+2), int32(10*me+3), int32(10*me+4)
				rd[0], rd[1] = at, at+16
				if err := C.NeighborAlltoallw(ctx, c, g, buf, counts, sd, types, buf, counts, rd, types); err != nil {
					return fmt.Errorf("round %d: %w", round, err)
				}
				// rank 0's neighbour above (block 1) is rank 1, which sent it
				// its block 0 (down): values 11, 12; rank 1 gets rank 0's
				// block 1 (up): 3, 4 in its block 0.
				k, want := 1, []int32{11, 12}
				if me == 1 {
					k, want = 0, []int32{3, 4}
				}
				if got := a[(rd[k])/4 : rd[k]/4+2]; !slices.Equal(got, want) {
					return fmt.Errorf("round %d: block %d at byte %d = %v, want %v", round, k, rd[k], got, want)
				}
			}
			rd[0], rd[1] = 0, 8 // the receive layouts over the send layouts
			if err := C.NeighborAlltoallw(ctx, c, g, buf, counts, sd, types, buf, counts, rd, types); !errors.Is(err, C.ErrInvalid) {
				return fmt.Errorf("overlapping layouts after a change: %v, want ErrInvalid", err)
			}
			return nil
		})
	})
}
