package endpoint_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// TestDimsCreate: the shapes MPI_Dims_create's documentation lists, more
// fixed and free mixes, and the inputs it rejects.
func TestDimsCreate(t *testing.T) {
	for _, tc := range []struct {
		n          int
		dims, want []int
	}{
		{6, []int{0, 0}, []int{3, 2}},
		{7, []int{0, 0}, []int{7, 1}},
		{6, []int{0, 3, 0}, []int{2, 3, 1}},
		{12, []int{0, 3, 0}, []int{2, 3, 2}},
		{24, []int{0, 0, 0}, []int{4, 3, 2}},
		{1, []int{0, 0, 0}, []int{1, 1, 1}},
		{1, nil, nil},
		{1, []int{}, []int{}},
		{64, []int{0, 0, 0}, []int{4, 4, 4}},
		{60, []int{0, 0, 0}, []int{5, 4, 3}},
		{36, []int{0, 0, 0, 0}, []int{3, 3, 2, 2}},
		{16, []int{0, 0, 0, 0, 0, 0}, []int{2, 2, 2, 2, 1, 1}},
		{97, []int{0, 0}, []int{97, 1}},
		{12, []int{4, 3}, []int{4, 3}},
		{12, []int{0, 4, 0}, []int{3, 4, 1}},
		{12, []int{1, 0, 1}, []int{1, 12, 1}},
		{8, []int{0, 1, 0}, []int{4, 1, 2}},
		{360, []int{0, 0, 0}, []int{10, 6, 6}}, // not 9 8 5: equally far apart, the larger pair wins
	} {
		in := slices.Clone(tc.dims)
		got, err := endpoint.DimsCreate(tc.n, tc.dims)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("DimsCreate(%d, %v) = %v, %v; want %v", tc.n, in, got, err, tc.want)
		}
		if !slices.Equal(tc.dims, in) {
			t.Errorf("DimsCreate(%d, %v) changed its argument to %v", tc.n, in, tc.dims)
		}
		if len(got) > 0 && len(tc.dims) > 0 && &got[0] == &tc.dims[0] {
			t.Errorf("DimsCreate(%d, %v) returned its argument", tc.n, in)
		}
	}
	for _, tc := range []struct {
		n    int
		dims []int
		why  string
	}{
		{0, []int{0, 0}, "no nodes"},
		{-4, []int{0}, "negative nodes"},
		{1 << 31, []int{0}, "more nodes than MPI's int counts"},
		{6, []int{0, -1}, "negative entry"},
		{7, []int{0, 2}, "7 is not a multiple of 2"},
		{12, []int{5, 0, 0}, "12 is not a multiple of 5"},
		{12, []int{4, 2}, "all fixed, product 8"},
		{12, []int{4, 4}, "all fixed, product 16"},
		{2, nil, "no dimensions hold one node"},
		{2, []int{}, "no dimensions hold one node"},
	} {
		got, err := endpoint.DimsCreate(tc.n, tc.dims)
		if !errors.Is(err, endpoint.ErrInvalid) || got != nil {
			t.Errorf("DimsCreate(%d, %v) (%s) = %v, %v; want an error wrapping ErrInvalid", tc.n, tc.dims, tc.why, got, err)
		}
	}
}

// shapes appends every non-increasing list of k factors of m, none above
// limit, after prefix.
func shapes(m, k, limit int, prefix []int, out [][]int) [][]int {
	if k == 0 {
		if m == 1 {
			out = append(out, slices.Clone(prefix))
		}
		return out
	}
	for d := 1; d <= min(m, limit); d++ {
		if m%d == 0 {
			out = shapes(m/d, k-1, d, append(prefix, d), out)
		}
	}
	return out
}

// moreEven says whether shape a is preferred to b by the rule DimsCreate
// documents: from the outermost pair (largest, smallest) inwards, the pair
// closer together wins, then the pair with the larger first entry.
func moreEven(a, b []int) bool {
	for i, j := 0, len(a)-1; i <= j; i, j = i+1, j-1 {
		if a[i]-a[j] != b[i]-b[j] {
			return a[i]-a[j] < b[i]-b[j]
		}
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}

// TestDimsCreateExhaustive: for every n up to 400 and up to 5 free
// dimensions, DimsCreate's shape is the best of all shapes by the
// documented rule (found by listing them all), and with fixed entries the
// fixed ones stay and the free ones get the best shape of what is left.
func TestDimsCreateExhaustive(t *testing.T) {
	for k := 1; k <= 5; k++ {
		for n := 1; n <= 400; n++ {
			all := shapes(n, k, n, nil, nil)
			best := all[0]
			for _, s := range all[1:] {
				if moreEven(s, best) {
					best = s
				}
			}
			got, err := endpoint.DimsCreate(n, make([]int, k))
			if err != nil || !slices.Equal(got, best) {
				t.Fatalf("DimsCreate(%d, %d free) = %v, %v; the best of %d shapes is %v", n, k, got, err, len(all), best)
			}
			// The same shape around fixed entries: 3 first, 2 in the middle.
			if n%6 == 0 {
				in := append([]int{3}, make([]int, k)...)
				in = slices.Insert(in, 1+k/2, 2)
				got, err := endpoint.DimsCreate(n, in)
				free, _ := endpoint.DimsCreate(n/6, make([]int, k))
				want := append([]int{3}, free...)
				want = slices.Insert(want, 1+k/2, 2)
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("DimsCreate(%d, %v) = %v, %v; want %v", n, in, got, err, want)
				}
			}
		}
	}
}

// TestDimsCreateMPICH compares DimsCreate with MPICH's MPI_Dims_create
// (a small C program built with mpicc, run as an MPI singleton) on every n
// up to 1000 with 1 to 5 free dimensions, and on fixed and free mixes.
func TestDimsCreateMPICH(t *testing.T) {
	src := filepath.Join(t.TempDir(), "dims.c")
	// Reads "n ndims d0 d1 ..." lines, answers each with MPI_Dims_create's dims.
	prog := `#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
	int n, nd, d[16];
	MPI_Init(&argc, &argv);
	while (scanf("%d %d", &n, &nd) == 2) {
		for (int i = 0; i < nd; i++) scanf("%d", &d[i]);
		MPI_Dims_create(n, nd, d);
		for (int i = 0; i < nd; i++) printf(i ? " %d" : "%d", d[i]);
		printf("\n");
	}
	MPI_Finalize();
	return 0;
}
`
	if err := os.WriteFile(src, []byte(prog), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := testenv.MPICH(t, src)
	var queries [][]int // n, then dims
	for k := 1; k <= 5; k++ {
		for n := 1; n <= 1000; n++ {
			queries = append(queries, append([]int{n}, make([]int, k)...))
		}
	}
	for _, fixed := range [][]int{{0, 3, 0}, {2, 0, 0}, {0, 0, 4}, {0, 1, 0, 0}, {0, 2, 0, 2, 0}} {
		p := 1
		for _, d := range fixed {
			p *= max(d, 1)
		}
		for n := p; n <= 1000; n += p {
			queries = append(queries, append([]int{n}, fixed...))
		}
	}
	var in strings.Builder
	for _, q := range queries {
		fmt.Fprintf(&in, "%d %d", q[0], len(q)-1)
		for _, d := range q[1:] {
			fmt.Fprintf(&in, " %d", d)
		}
		in.WriteByte('\n')
	}
	out := testenv.RunSingleton(t, bin, in.String())
	sc := bufio.NewScanner(strings.NewReader(out))
	i, bad := 0, 0
	for ; sc.Scan() && i < len(queries); i++ {
		var want []int
		for _, f := range strings.Fields(sc.Text()) {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("MPICH answered %q", sc.Text())
			}
			want = append(want, v)
		}
		q := queries[i]
		got, err := endpoint.DimsCreate(q[0], q[1:])
		if err != nil || !slices.Equal(got, want) {
			if bad++; bad <= 20 {
				t.Errorf("DimsCreate(%d, %v) = %v, %v; MPICH %v", q[0], q[1:], got, err, want)
			}
		}
	}
	if i != len(queries) {
		t.Fatalf("MPICH answered %d of %d queries", i, len(queries))
	}
	t.Logf("%d shapes compared with MPICH, %d differ", len(queries), bad)
}

// cartHandles runs body on n endpoints of one process (a singleton job),
// each in its own goroutine, with a world of their own.
func cartHandles(t *testing.T, n int, body func(ctx context.Context, c *endpoint.Comm) error) {
	t.Helper()
	singleton(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	defer w.Close()
	eps, err := w.Comm().CreateEndpoints(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	runHandles(t, ctx, eps, func(ctx context.Context, c *endpoint.Comm) error {
		defer c.Free()
		return body(ctx, c)
	})
}

// gridCoords is the test's own row-major layout: coordinates of rank r.
func gridCoords(r int, dims []int) []int {
	x := make([]int, len(dims))
	for i := len(dims) - 1; i >= 0; i-- {
		x[i] = r % dims[i]
		r /= dims[i]
	}
	return x
}

// checkGrid checks every query a Cart answers against the test's own
// arithmetic: Dims, Periods, Coords and Rank for every rank (and wrapped
// coordinates), Shift along every dimension for displacements past the
// extent both ways, and the errors.
func checkGrid(g *endpoint.Cart, dims []int, periods []bool) error {
	if !slices.Equal(g.Dims(), dims) || !slices.Equal(g.Periods(), periods) {
		return fmt.Errorf("Dims %v Periods %v, want %v %v", g.Dims(), g.Periods(), dims, periods)
	}
	size := 1
	for _, d := range dims {
		size *= d
	}
	c := g.Comm()
	if c.Size() != size {
		return fmt.Errorf("grid communicator of %d ranks, want %d", c.Size(), size)
	}
	for r := range size {
		x, err := g.Coords(r)
		if err != nil || !slices.Equal(x, gridCoords(r, dims)) {
			return fmt.Errorf("Coords(%d) = %v, %v; want %v", r, x, err, gridCoords(r, dims))
		}
		if back, err := g.Rank(x); err != nil || back != r {
			return fmt.Errorf("Rank(%v) = %d, %v; want %d", x, back, err, r)
		}
		for i := range dims {
			for _, k := range []int{-2, -1, 1, 3} {
				y := slices.Clone(x)
				y[i] += k * dims[i]
				got, err := g.Rank(y)
				switch {
				case periods[i] && (err != nil || got != r):
					return fmt.Errorf("Rank(%v) in periodic dimension %d = %d, %v; want %d", y, i, got, err, r)
				case !periods[i] && !errors.Is(err, endpoint.ErrInvalid):
					return fmt.Errorf("Rank(%v) off non-periodic dimension %d = %d, %v; want ErrInvalid", y, i, got, err)
				}
			}
		}
	}
	me := gridCoords(c.Rank(), dims)
	at := func(i, step int) int { // the test's own neighbour rule
		y := slices.Clone(me)
		y[i] += step
		if y[i] < 0 || y[i] >= dims[i] {
			if !periods[i] {
				return endpoint.ProcNull
			}
			y[i] = (y[i]%dims[i] + dims[i]) % dims[i]
		}
		r := 0
		for j, v := range y {
			r = r*dims[j] + v
		}
		return r
	}
	for i := range dims {
		for disp := -2*dims[i] - 1; disp <= 2*dims[i]+1; disp++ {
			src, dst, err := g.Shift(i, disp)
			if err != nil || src != at(i, -disp) || dst != at(i, disp) {
				return fmt.Errorf("rank %d at %v: Shift(%d, %d) = %d, %d, %v; want %d, %d", c.Rank(), me, i, disp, src, dst, err, at(i, -disp), at(i, disp))
			}
		}
	}
	wrong := len(dims) - 1 // coordinates of the wrong length
	if wrong < 0 {
		wrong = 1
	}
	for _, bad := range []struct {
		what string
		err  error
	}{
		{"Coords(-1)", second(g.Coords(-1))},
		{"Coords(size)", second(g.Coords(size))},
		{"Rank(short)", second(g.Rank(make([]int, wrong)))},
		{"Rank(long)", second(g.Rank(append(slices.Clone(me), 0)))},
		{"Shift(-1, 1)", third(g.Shift(-1, 1))},
		{"Shift(ndims, 1)", third(g.Shift(len(dims), 1))},
	} {
		if !errors.Is(bad.err, endpoint.ErrInvalid) {
			return fmt.Errorf("%s: %v, want ErrInvalid", bad.what, bad.err)
		}
	}
	return nil
}

func second[A, B any](_ A, b B) B        { return b }
func third[A, B, C any](_ A, _ B, c C) C { return c }

// exchange sends this rank's number to both neighbours along every
// dimension and checks that each neighbour's number comes back; operations
// with a ProcNull neighbour are posted too and move nothing.
func exchange(ctx context.Context, g *endpoint.Cart) error {
	c := g.Comm()
	type want struct {
		from int
		buf  []byte
	}
	var reqs []*endpoint.Request
	var wants []want
	mine := []byte{byte(c.Rank())}
	for i := range g.Dims() {
		src, dst, err := g.Shift(i, 1)
		if err != nil {
			return err
		}
		// Forward along i with tag 2i, backward with tag 2i+1.
		for _, p := range []struct{ from, to, tag int }{{src, dst, 2 * i}, {dst, src, 2*i + 1}} {
			b := []byte{0xff}
			r, err := c.Irecv(b, p.from, p.tag)
			if err != nil {
				return err
			}
			reqs, wants = append(reqs, r), append(wants, want{p.from, b})
			if r, err = c.Isend(mine, p.to, p.tag); err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	if err := endpoint.WaitAll(ctx, reqs...); err != nil {
		return err
	}
	for _, w := range wants {
		if w.from == endpoint.ProcNull {
			if w.buf[0] != 0xff {
				return fmt.Errorf("rank %d: a receive from ProcNull wrote %d", c.Rank(), w.buf[0])
			}
			continue
		}
		if int(w.buf[0]) != w.from {
			return fmt.Errorf("rank %d: got %d from neighbour %d", c.Rank(), w.buf[0], w.from)
		}
	}
	return nil
}

// TestCartGrids: 12 endpoints of one process build grids of several
// shapes and periodicities; each checks every query against the test's own
// arithmetic and exchanges ranks with its neighbours. Ranks beyond a
// smaller grid get nil.
func TestCartGrids(t *testing.T) {
	for _, tc := range []struct {
		dims    []int
		periods []bool
	}{
		{[]int{3, 4}, []bool{true, true}},
		{[]int{3, 4}, []bool{false, false}},
		{[]int{2, 3, 2}, []bool{true, false, true}},
		{[]int{12}, []bool{true}},
		{[]int{12}, nil},
		{[]int{2, 5}, []bool{false, true}}, // 10 of 12
		{[]int{1, 1, 7}, []bool{true, false, false}},
		{nil, nil}, // no dimensions: rank 0 alone
	} {
		t.Run(fmt.Sprint(tc.dims, tc.periods), func(t *testing.T) {
			cartHandles(t, 12, func(ctx context.Context, c *endpoint.Comm) error {
				g, err := c.CartCreate(ctx, tc.dims, tc.periods)
				if err != nil {
					return err
				}
				size := 1
				for _, d := range tc.dims {
					size *= d
				}
				if c.Rank() >= size {
					if g != nil {
						return fmt.Errorf("rank %d beyond a grid of %d got a Cart", c.Rank(), size)
					}
					return g.Free() // a nil Cart frees as nil
				}
				if g == nil {
					return fmt.Errorf("rank %d of a grid of %d got nil", c.Rank(), size)
				}
				defer g.Free()
				gc := g.Comm()
				if gc.Rank() != c.Rank() || gc.ContextID() == c.ContextID() {
					return fmt.Errorf("grid rank %d context %d, parent rank %d context %d", gc.Rank(), gc.ContextID(), c.Rank(), c.ContextID())
				}
				periods := tc.periods
				if periods == nil {
					periods = make([]bool, len(tc.dims))
				}
				if err := checkGrid(g, tc.dims, periods); err != nil {
					return err
				}
				if err := exchange(ctx, g); err != nil {
					return err
				}
				return gc.Barrier(ctx)
			})
		})
	}
}

// TestCartSub: a 2x3x2 grid split into its 2x2 planes (dimension 1
// dropped) and its rows along dimension 1: each sub-grid holds the ranks
// that share the dropped coordinates, numbered row-major by the kept ones,
// with the kept extents and periods. Dropping every dimension leaves each
// rank alone.
func TestCartSub(t *testing.T) {
	dims, periods := []int{2, 3, 2}, []bool{true, false, false}
	cartHandles(t, 12, func(ctx context.Context, c *endpoint.Comm) error {
		g, err := c.CartCreate(ctx, dims, periods)
		if err != nil {
			return err
		}
		defer g.Free()
		me := gridCoords(c.Rank(), dims)
		for _, tc := range []struct {
			remain  []bool
			dims    []int
			periods []bool
			rank    int // this rank's in the sub-grid
			color   int // the dropped coordinates, as one number
		}{
			{[]bool{true, false, true}, []int{2, 2}, []bool{true, false}, me[0]*2 + me[2], me[1]},
			{[]bool{false, true, false}, []int{3}, []bool{false}, me[1], me[0]*2 + me[2]},
			{[]bool{false, false, false}, nil, nil, 0, c.Rank()},
			{[]bool{true, true, true}, dims, periods, c.Rank(), 0},
		} {
			s, err := g.Sub(ctx, tc.remain)
			if err != nil {
				return err
			}
			sc := s.Comm()
			if sc.Rank() != tc.rank || !slices.Equal(s.Dims(), tc.dims) || !slices.Equal(s.Periods(), tc.periods) {
				s.Free()
				return fmt.Errorf("Sub(%v) at %v: rank %d dims %v periods %v; want %d %v %v", tc.remain, me, sc.Rank(), s.Dims(), s.Periods(), tc.rank, tc.dims, tc.periods)
			}
			all, err := sc.Allgather(ctx, []byte{byte(tc.color)})
			if err == nil {
				for r, b := range all {
					if b[0] != byte(tc.color) {
						err = fmt.Errorf("Sub(%v): member %d has dropped coordinates %d, this rank %d", tc.remain, r, b[0], tc.color)
					}
				}
			}
			if err == nil {
				err = exchange(ctx, s)
			}
			s.Free()
			if err != nil {
				return err
			}
		}
		if _, err := g.Sub(ctx, []bool{true}); !errors.Is(err, endpoint.ErrInvalid) {
			return fmt.Errorf("Sub with 1 flag for 3 dimensions: %v", err)
		}
		return nil
	})
}

// TestCartCreateBadArgs: arguments that are wrong everywhere, or differ
// between ranks, make every rank return ErrInvalid at once (no rank waits
// for the others' split), and the communicator stays usable.
func TestCartCreateBadArgs(t *testing.T) {
	cartHandles(t, 4, func(ctx context.Context, c *endpoint.Comm) error {
		for _, tc := range []struct {
			name    string
			dims    []int
			periods []bool
		}{
			{"too many points", []int{5}, nil},
			{"zero extent", []int{2, 0}, nil},
			{"negative extent", []int{-2, -2}, nil},
			{"periods length", []int{2, 2}, []bool{true}},
			{"odd ranks differ", []int{4 - 2*min(c.Rank()%2, 1), 1 + min(c.Rank()%2, 1)}, nil},
			{"rank 3 periods differ", []int{2, 2}, []bool{c.Rank() == 3, false}},
		} {
			start := time.Now()
			g, err := c.CartCreate(ctx, tc.dims, tc.periods)
			if g != nil || !errors.Is(err, endpoint.ErrInvalid) {
				return fmt.Errorf("%s: %v, %v; want ErrInvalid", tc.name, g, err)
			}
			if d := time.Since(start); d > 10*time.Second {
				return fmt.Errorf("%s: the error took %v", tc.name, d)
			}
		}
		// nil periods and explicit false ones are the same arguments.
		var periods []bool
		if c.Rank()%2 == 1 {
			periods = []bool{false, false}
		}
		g, err := c.CartCreate(ctx, []int{2, 2}, periods)
		if err != nil {
			return err
		}
		if !slices.Equal(g.Periods(), []bool{false, false}) {
			return fmt.Errorf("periods %v", g.Periods())
		}
		return g.Free()
	})
}

// TestCartNilAndFreed: a nil Cart answers without panicking, and a freed
// one says ErrClosed.
func TestCartNilAndFreed(t *testing.T) {
	var g *endpoint.Cart
	if g.Comm() != nil || g.Dims() != nil || g.Periods() != nil || g.Free() != nil {
		t.Error("nil Cart: accessors not nil")
	}
	if _, err := g.Coords(0); !errors.Is(err, endpoint.ErrInvalid) {
		t.Errorf("nil Cart Coords: %v", err)
	}
	if _, err := g.Rank(nil); !errors.Is(err, endpoint.ErrInvalid) {
		t.Errorf("nil Cart Rank: %v", err)
	}
	if _, _, err := g.Shift(0, 1); !errors.Is(err, endpoint.ErrInvalid) {
		t.Errorf("nil Cart Shift: %v", err)
	}
	if _, err := g.Sub(context.Background(), nil); !errors.Is(err, endpoint.ErrInvalid) {
		t.Errorf("nil Cart Sub: %v", err)
	}
	var c *endpoint.Comm
	if _, err := c.CartCreate(context.Background(), []int{1}, nil); !errors.Is(err, endpoint.ErrInvalid) {
		t.Errorf("CartCreate on a nil Comm: %v", err)
	}
	cartHandles(t, 2, func(ctx context.Context, c *endpoint.Comm) error {
		g, err := c.CartCreate(ctx, []int{2}, []bool{true})
		if err != nil {
			return err
		}
		if err := g.Free(); err != nil {
			return err
		}
		if err := g.Free(); err != nil {
			return fmt.Errorf("second Free: %v", err)
		}
		if _, err := g.Coords(0); !errors.Is(err, endpoint.ErrClosed) {
			return fmt.Errorf("Coords after Free: %v", err)
		}
		if _, _, err := g.Shift(0, 1); !errors.Is(err, endpoint.ErrClosed) {
			return fmt.Errorf("Shift after Free: %v", err)
		}
		if _, err := g.Sub(ctx, []bool{true}); !errors.Is(err, endpoint.ErrClosed) {
			return fmt.Errorf("Sub after Free: %v", err)
		}
		return nil
	})
}

// TestCartHaloProcesses: 4 processes build a 2x2 periodic grid and swap
// their ranks with the 4 neighbours (Shift + Irecv/Isend). Before that,
// each sends a decoy with the same tag on the parent communicator, to the
// same neighbour: the grid's receive must not take it.
func TestCartHaloProcesses(t *testing.T) {
	for _, p := range providers {
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 4, p, 60*time.Second) {
				return
			}
			w := initWorld(t)
			c := w.Comm()
			ctx := eptest.Ctx(t, 30*time.Second)
			g, err := c.CartCreate(ctx, []int{2, 2}, []bool{true, true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Free()
			if g == nil || g.Comm().Size() != 4 || g.Comm().Rank() != c.Rank() {
				t.Fatalf("grid %v", g)
			}
			_, dst, err := g.Shift(0, 1)
			if err != nil {
				t.Fatal(err)
			}
			decoy, err := c.Isend([]byte{0xee}, dst, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := exchange(ctx, g); err != nil {
				t.Fatal(err)
			}
			// What each neighbour is, by hand: in a 2x2 torus both
			// neighbours along a dimension are the same rank.
			me, _ := g.Coords(g.Comm().Rank())
			for i := range 2 {
				src, dst, _ := g.Shift(i, 1)
				y := slices.Clone(me)
				y[i] = 1 - y[i]
				if r, _ := g.Rank(y); src != r || dst != r {
					t.Fatalf("at %v: Shift(%d, 1) = %d, %d; the neighbour is %d", me, i, src, dst, r)
				}
			}
			src, _, _ := g.Shift(0, 1)
			b := []byte{0}
			if _, err := c.Recv(ctx, b, src, 0); err != nil || b[0] != 0xee {
				t.Fatalf("decoy on the parent: %x, %v", b, err)
			}
			if _, err := decoy.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCartBeyondGridProcesses: 3 processes, a grid of [2]: rank 2 gets a
// nil Cart and no error (MPI_COMM_NULL); ranks 0 and 1 are each other's
// only neighbour, with ProcNull beyond the ends.
func TestCartBeyondGridProcesses(t *testing.T) {
	if launch(t, 3, "native", 60*time.Second) {
		return
	}
	w := initWorld(t)
	c := w.Comm()
	ctx := eptest.Ctx(t, 30*time.Second)
	g, err := c.CartCreate(ctx, []int{2}, []bool{false})
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() == 2 {
		if g != nil {
			t.Fatalf("rank 2 got a Cart of %d", g.Comm().Size())
		}
	} else {
		if g == nil {
			t.Fatalf("rank %d got nil", c.Rank())
		}
		defer g.Free()
		src, dst, err := g.Shift(0, 1)
		want := [][2]int{{endpoint.ProcNull, 1}, {0, endpoint.ProcNull}}[c.Rank()]
		if err != nil || src != want[0] || dst != want[1] {
			t.Fatalf("rank %d: Shift(0, 1) = %d, %d, %v; want %v", c.Rank(), src, dst, err, want)
		}
		if err := exchange(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}

// DimsCreate picks a grid shape for a number of processes, filling the
// zero entries and keeping the others.
func ExampleDimsCreate() {
	for _, in := range []struct {
		n    int
		dims []int
	}{{6, []int{0, 0}}, {24, []int{0, 0, 0}}, {12, []int{0, 3, 0}}, {7, []int{0, 0}}} {
		dims, err := endpoint.DimsCreate(in.n, in.dims)
		fmt.Println(in.n, in.dims, "->", dims, err)
	}
	_, err := endpoint.DimsCreate(7, []int{0, 2})
	fmt.Println(errors.Is(err, endpoint.ErrInvalid))
	// Output:
	// 6 [0 0] -> [3 2] <nil>
	// 24 [0 0 0] -> [4 3 2] <nil>
	// 12 [0 3 0] -> [2 3 2] <nil>
	// 7 [0 0] -> [7 1] <nil>
	// true
}

// A halo exchange on a periodic 2x2 grid: each rank sends its number to
// its neighbour ahead along each dimension and receives from the one
// behind (Shift). The four ranks are endpoints of one process here, each
// driven by its own goroutine; across processes the body is the same.
func ExampleComm_CartCreate() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	dims, _ := endpoint.DimsCreate(4, []int{0, 0})
	eps, err := w.Comm().CreateEndpoints(ctx, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	out := make([]string, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ep.Free()
			s, err := halo(ctx, ep, dims)
			if err != nil {
				s = err.Error()
			}
			out[i] = s
		}()
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// rank 0 at [0 0]: from 2 along 0, from 1 along 1
	// rank 1 at [0 1]: from 3 along 0, from 0 along 1
	// rank 2 at [1 0]: from 0 along 0, from 3 along 1
	// rank 3 at [1 1]: from 1 along 0, from 2 along 1
}

// halo is one rank's part of ExampleComm_CartCreate.
func halo(ctx context.Context, c *endpoint.Comm, dims []int) (string, error) {
	g, err := c.CartCreate(ctx, dims, []bool{true, true})
	if err != nil || g == nil { // nil: this rank is not on the grid
		return "", err
	}
	defer g.Free()
	gc := g.Comm()
	me, _ := g.Coords(gc.Rank())
	s := fmt.Sprintf("rank %d at %v:", gc.Rank(), me)
	for dim := range dims {
		src, dst, err := g.Shift(dim, 1)
		if err != nil {
			return "", err
		}
		got := make([]byte, 1)
		r, err := gc.Irecv(got, src, dim)
		if err != nil {
			return "", err
		}
		if err := gc.Send(ctx, []byte{byte(gc.Rank())}, dst, dim); err != nil {
			return "", err
		}
		if _, err := r.Wait(ctx); err != nil {
			return "", err
		}
		s += fmt.Sprintf(" from %d along %d,", got[0], dim)
	}
	return strings.TrimSuffix(s, ","), nil
}
