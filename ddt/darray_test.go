package ddt_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/testenv"
)

// darrayCase is one process grid and distribution of a global array.
type darrayCase struct {
	g, dist, darg, p []int
	order            Order
}

func (c darrayCase) size() int {
	n := 1
	for _, p := range c.p {
		n *= p
	}
	return n
}

func (c darrayCase) distribs() []Distribution {
	d := make([]Distribution, len(c.dist))
	for i, x := range c.dist {
		d[i] = Distribution(x)
	}
	return d
}

func (c darrayCase) String() string {
	o := "C"
	if c.order == OrderFortran {
		o = "F"
	}
	return fmt.Sprintf("g%v dist%v darg%v p%v %s", c.g, c.dist, c.darg, c.p, o)
}

// darrayCases are hand-picked grids (block, cyclic, block-cyclic, none,
// processes left without data, uneven ends) and random ones.
func darrayCases() []darrayCase {
	const b, c, n, d = int(DistributeBlock), int(DistributeCyclic), int(DistributeNone), DistributeDefaultArg
	cs := []darrayCase{
		{[]int{10}, []int{b}, []int{d}, []int{3}, OrderC},
		{[]int{10}, []int{b}, []int{4}, []int{3}, OrderC},
		{[]int{10}, []int{b}, []int{5}, []int{3}, OrderC}, // the last process holds nothing
		{[]int{10}, []int{c}, []int{d}, []int{3}, OrderC},
		{[]int{10}, []int{c}, []int{3}, []int{2}, OrderC},  // a cut last block
		{[]int{10}, []int{c}, []int{20}, []int{3}, OrderC}, // one block holds all
		{[]int{7, 9}, []int{b, c}, []int{d, 2}, []int{2, 3}, OrderC},
		{[]int{7, 9}, []int{b, c}, []int{d, 2}, []int{2, 3}, OrderFortran},
		{[]int{8, 6}, []int{c, c}, []int{2, 2}, []int{2, 2}, OrderC}, // ScaLAPACK 2x2 block-cyclic
		{[]int{8, 6}, []int{n, b}, []int{d, d}, []int{1, 4}, OrderC},
		{[]int{5, 4, 6}, []int{b, n, c}, []int{d, d, 2}, []int{2, 1, 2}, OrderFortran},
		{[]int{4, 5, 3}, []int{c, b, c}, []int{1, 2, d}, []int{2, 3, 2}, OrderC},
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range 120 {
		nd := 1 + r.IntN(3)
		var k darrayCase
		k.order = Order(r.IntN(2))
		for range nd {
			g := 1 + r.IntN(9)
			dist := 1 + r.IntN(3)
			p, darg := 1+r.IntN(3), d
			if dist == n {
				p = 1
			}
			if r.IntN(2) == 0 {
				darg = 1 + r.IntN(4)
				if dist == b && darg*p < g {
					darg = (g + p - 1) / p
				}
			}
			k.g, k.dist, k.darg, k.p = append(k.g, g), append(k.dist, dist), append(k.darg, darg), append(k.p, p)
		}
		cs = append(cs, k)
	}
	return cs
}

// TestDarray: every rank's type of every case agrees with the expansion of
// MPI's definition (ddttest), entry points and chunked packs included, has
// lb 0 and the whole array's extent, and the ranks' parts cover the array
// once: each element in exactly one part.
func TestDarray(t *testing.T) {
	for _, c := range darrayCases() {
		total := 1
		for _, g := range c.g {
			total *= g
		}
		owner := make([]int, total)
		for rank := range c.size() {
			tt, err := Darray(c.size(), rank, c.g, c.distribs(), c.darg, c.p, c.order, Int32)
			if err != nil {
				t.Fatalf("%v rank %d: %v", c, rank, err)
			}
			if tt.LB() != 0 || tt.Extent() != int64(4*total) {
				t.Fatalf("%v rank %d: lb %d extent %d, want 0 and %d", c, rank, tt.LB(), tt.Extent(), 4*total)
			}
			checkAgainstRef(t, tt, 1+rank%2, []int{4, 12})
			global := make([]byte, 4*total)
			for i := range total {
				binary.LittleEndian.PutUint32(global[4*i:], uint32(i+1))
			}
			packed := make([]byte, tt.Size())
			if _, err := tt.PackRange(packed, global, 0, 1, 0); err != nil {
				t.Fatal(err)
			}
			prev := -1
			for k := 0; k < len(packed); k += 4 {
				i := int(binary.LittleEndian.Uint32(packed[k:])) - 1
				if owner[i] != 0 {
					t.Fatalf("%v: element %d in the parts of ranks %d and %d", c, i, owner[i]-1, rank)
				}
				owner[i] = rank + 1
				if c.order == OrderC && i <= prev {
					t.Fatalf("%v rank %d: element %d after %d: not in storage order", c, rank, i, prev)
				}
				prev = i
			}
		}
		if i := slices.Index(owner, 0); i >= 0 {
			t.Fatalf("%v: element %d in no rank's part", c, i)
		}
	}
}

func TestDarrayContents(t *testing.T) {
	tt, err := Darray(6, 4, []int{7, 9}, []Distribution{DistributeBlock, DistributeCyclic}, []int{DistributeDefaultArg, 2},
		[]int{2, 3}, OrderFortran, Float64)
	if err != nil {
		t.Fatal(err)
	}
	c := tt.Contents()
	want := []int{6, 4, 2, 7, 9, int(DistributeBlock), int(DistributeCyclic), DistributeDefaultArg, 2, 2, 3, int(OrderFortran)}
	if c.Combiner != CombinerDarray || !slices.Equal(c.Ints, want) || len(c.Types) != 1 || c.Types[0] != Float64 || len(c.Addrs) != 0 {
		t.Errorf("contents %v %v %v %v", c.Combiner, c.Ints, c.Addrs, c.Types)
	}
	if CombinerDarray.String() != "darray" {
		t.Errorf("combiner name %q", CombinerDarray)
	}
}

func TestDarrayErrors(t *testing.T) {
	B, C, N, D := DistributeBlock, DistributeCyclic, DistributeNone, DistributeDefaultArg
	type ds = []Distribution
	type is = []int
	for _, c := range []struct {
		name       string
		size, rank int
		g          is
		dist       ds
		darg, p    is
		order      Order
		old        *Type
	}{
		{"no dimensions", 1, 0, nil, nil, nil, nil, OrderC, Int32},
		{"lengths differ", 2, 0, is{4, 4}, ds{B}, is{D, D}, is{2, 1}, OrderC, Int32},
		{"grid of another size", 4, 0, is{4}, ds{B}, is{D}, is{2}, OrderC, Int32},
		{"rank outside", 2, 2, is{4}, ds{B}, is{D}, is{2}, OrderC, Int32},
		{"negative rank", 2, -1, is{4}, ds{B}, is{D}, is{2}, OrderC, Int32},
		{"zero gsize", 1, 0, is{0}, ds{B}, is{D}, is{1}, OrderC, Int32},
		{"zero psize", 0, 0, is{4}, ds{B}, is{D}, is{0}, OrderC, Int32},
		{"unknown distribution", 1, 0, is{4}, ds{9}, is{D}, is{1}, OrderC, Int32},
		{"none over two processes", 2, 0, is{4}, ds{N}, is{D}, is{2}, OrderC, Int32},
		{"zero darg", 2, 0, is{4}, ds{C}, is{0}, is{2}, OrderC, Int32},
		{"blocks too small", 2, 0, is{10}, ds{B}, is{4}, is{2}, OrderC, Int32},
		{"bad order", 1, 0, is{4}, ds{B}, is{D}, is{1}, Order(5), Int32},
		{"nil type", 1, 0, is{4}, ds{B}, is{D}, is{1}, OrderC, nil},
	} {
		if _, err := Darray(c.size, c.rank, c.g, c.dist, c.darg, c.p, c.order, c.old); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	_, err := Darray(1, 0, []int{1 << 40, 1 << 40}, []Distribution{N, N}, []int{D, D}, []int{1, 1}, OrderC, Float64)
	if !errors.Is(err, ErrOverflow) {
		t.Errorf("an array of 2^80 elements: %v, want ErrOverflow", err)
	}
}

// TestDarrayMPICH: every rank's type of every case selects the same
// elements in the same order, with the same bounds, as MPICH's
// MPI_Type_create_darray (testdata/darray.c, a singleton MPICH program).
func TestDarrayMPICH(t *testing.T) {
	bin := testenv.MPICH(t, filepath.Join("testdata", "darray.c"))
	type query struct {
		c    darrayCase
		rank int
	}
	var qs []query
	var in strings.Builder
	for _, c := range darrayCases() {
		for rank := range c.size() {
			qs = append(qs, query{c, rank})
			fmt.Fprintf(&in, "%d %d %d %d", c.size(), rank, len(c.g), c.order)
			for _, xs := range [][]int{c.g, c.dist, c.darg, c.p} {
				for _, x := range xs {
					fmt.Fprintf(&in, " %d", x)
				}
			}
			in.WriteByte('\n')
		}
	}
	lines := strings.Split(strings.TrimSpace(testenv.RunSingleton(t, bin, in.String())), "\n")
	if len(lines) != len(qs) {
		t.Fatalf("MPICH answered %d of %d queries", len(lines), len(qs))
	}
	for i, q := range qs {
		var want []int64
		for _, f := range strings.Fields(lines[i]) {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("MPICH answered %q", lines[i])
			}
			want = append(want, v)
		}
		c := q.c
		tt, err := Darray(c.size(), q.rank, c.g, c.distribs(), c.darg, c.p, c.order, Int32)
		if err != nil {
			t.Fatalf("%v rank %d: %v", c, q.rank, err)
		}
		if err := tt.Commit(); err != nil {
			t.Fatal(err)
		}
		global := make([]byte, tt.Extent())
		for k := 0; k < len(global); k += 4 {
			binary.LittleEndian.PutUint32(global[k:], uint32(k/4))
		}
		packed := make([]byte, tt.Size())
		if _, err := tt.PackRange(packed, global, 0, 1, 0); err != nil {
			t.Fatal(err)
		}
		got := []int64{tt.LB(), tt.Extent(), tt.Size() / 4}
		for k := 0; k < len(packed); k += 4 {
			got = append(got, int64(binary.LittleEndian.Uint32(packed[k:])))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v rank %d: weft (lb, extent, n, indices) %v, MPICH %v", c, q.rank, got, want)
		}
	}
}
