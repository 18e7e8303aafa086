package main

import (
	"bytes"
	"errors"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/test/bench/internal/ddtcases"
	"github.com/weft-hpc/weft/test/bench/internal/tooltest"
)

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig("^nas_mg", "l, s", "openmpi,mpich,openmpi", 3, 100, 10, 5)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cfg.cases {
		got = append(got, c.String())
	}
	want := []string{"nas_mg_x/s", "nas_mg_x/l", "nas_mg_y/s", "nas_mg_y/l", "nas_mg_z/s", "nas_mg_z/l"}
	if !slices.Equal(got, want) || !slices.Equal(cfg.refs, []string{"openmpi", "mpich"}) || cfg.reps != 3 {
		t.Errorf("cases %v refs %v, want %v and [openmpi mpich]", got, cfg.refs, want)
	}
	if cfg, err := parseConfig("", "s", "", 1, 1, 1, 1); err != nil || len(cfg.cases) != len(ddtcases.Names()) || len(cfg.refs) != 0 {
		t.Errorf("all cases at s, no MPI: %v", err)
	}
	for _, bad := range []struct {
		cases, sizes, refs         string
		reps, iters, floor, rounds int
	}{
		{"(", "s", "", 1, 1, 1, 1},
		{"nosuch", "s", "", 1, 1, 1, 1},
		{"", "xl", "", 1, 1, 1, 1},
		{"", "", "", 1, 1, 1, 1},
		{"", "s", "lam", 1, 1, 1, 1},
		{"", "s", "", 0, 1, 1, 1},
		{"", "s", "", 1, 0, 1, 1},
		{"", "s", "", 1, 1, 0, 1},
		{"", "s", "", 1, 1, 4, 5}, // more rounds than round trips
		{"", "s", "", 1, 1, 1, 0},
	} {
		if _, err := parseConfig(bad.cases, bad.sizes, bad.refs, bad.reps, bad.iters, bad.floor, bad.rounds); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestRecipeRebuildsEveryCase writes the recipe of every case at every
// size, reads it back and rebuilds each type from its lines alone with
// ddt's constructors (as the MPI program does with MPI's): the rebuilt
// type has the case's size and extent and packs the case's buffer to the
// same bytes, so the recipe leaves nothing of the layout out.
func TestRecipeRebuildsEveryCase(t *testing.T) {
	cases := ddtcases.All()
	var buf bytes.Buffer
	if err := writeRecipe(&buf, cases, func(c *ddtcases.Case) (int, int) { return 7, 1 }); err != nil {
		t.Fatal(err)
	}
	rp, err := readRecipe(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.cases) != len(cases) {
		t.Fatalf("%d cases read back, want %d", len(rp.cases), len(cases))
	}
	for k, c := range cases {
		rc := rp.cases[k]
		if rc.String() != c.String() || rc.count != c.Count || rc.typed != c.Typed || rc.bytes != c.Bytes ||
			rc.tsize != c.Type.Size() || rc.extent != c.Type.Extent() || rc.iters != 7 || rc.warmup != 1 {
			t.Fatalf("case line %+v does not describe %v", rc, c)
		}
		rt, err := rp.buildType(k)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if rt.Size() != c.Type.Size() || rt.Extent() != c.Type.Extent() || rt.LB() != c.Type.LB() {
			t.Fatalf("%v: rebuilt type %v, original %v", c, rt, c.Type)
		}
		typed := make([]byte, c.Typed)
		ddtcases.Fill(typed, 5)
		want, got := make([]byte, c.Bytes), make([]byte, c.Bytes)
		if _, err := c.Type.Pack(want, typed, c.Count); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.Pack(got, typed, c.Count); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: the rebuilt type packs other bytes", c)
		}
	}
}

// TestRecipeEveryConstructor: a type made with every constructor the
// format knows (the cases use only some) survives the round trip, and a
// component used twice is described once.
func TestRecipeEveryConstructor(t *testing.T) {
	must := func(t0 *ddt.Type, err error) *ddt.Type {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return t0
	}
	idx := must(ddt.Indexed([]int{1, 2}, []int{0, 3}, ddt.Int16))
	hidx := must(ddt.HIndexed([]int{2, 1}, []int64{0, 16}, ddt.Uint8))
	sub := must(ddt.Subarray([]int{4, 5}, []int{2, 3}, []int{1, 1}, ddt.OrderC, ddt.Complex64))
	dup := must(ddt.Dup(must(ddt.Vector(2, 1, 3, ddt.Int64))))
	ib := must(ddt.IndexedBlock(2, []int{0, 4}, ddt.Uint32))
	st := must(ddt.Struct([]int{1, 2, 1, 1, 1}, []int64{0, 32, 80, 400, 600}, []*ddt.Type{idx, hidx, sub, dup, idx}))
	top := must(ddt.Resized(must(ddt.Contiguous(2, st)), 0, 1024))
	top = must(ddt.HVector(2, 1, 2048, must(ddt.Struct([]int{1, 1}, []int64{0, 900}, []*ddt.Type{top, ib}))))
	if err := top.Commit(); err != nil {
		t.Fatal(err)
	}
	lines, err := typeLines(top)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "indexed 2 ") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("component used twice described %d times:\n%s", n, strings.Join(lines, "\n"))
	}
	for _, kind := range []string{"named int16", "indexed ", "hindexed ", "indexed_block ", "subarray 2 4 5 2 3 1 1 c ", "dup ", "vector ", "struct ", "resized 0 1024 ", "contiguous ", "hvector "} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, kind)
		}
		if !found {
			t.Errorf("no %q line in\n%s", kind, strings.Join(lines, "\n"))
		}
	}
	rp := &recipe{cases: []recipeCase{{name: "x", size: "s"}}, types: [][][]string{nil}}
	for _, l := range lines {
		rp.types[0] = append(rp.types[0], strings.Fields(l))
	}
	rt, err := rp.buildType(0)
	if err != nil {
		t.Fatal(err)
	}
	typed := make([]byte, top.UB()+8)
	ddtcases.Fill(typed, 9)
	want, got := make([]byte, top.Size()), make([]byte, top.Size())
	if _, err := top.Pack(want, typed, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Pack(got, typed, 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || rt.Extent() != top.Extent() {
		t.Error("the rebuilt type differs")
	}
}

func TestReadRecipeRejects(t *testing.T) {
	const good = "ddtpp 1\ncase a s 1 8 4 4 8 10 1 2\ntype 0 named int32\ntype 1 vector 1 1 2 0\n"
	rp, err := readRecipe(strings.NewReader(good))
	if err != nil || len(rp.cases) != 1 || len(rp.types[0]) != 2 {
		t.Fatalf("good recipe: %+v, %v", rp, err)
	}
	if _, err := rp.buildType(0); err != nil {
		t.Errorf("good recipe's type: %v", err)
	}
	for _, bad := range []string{
		"",
		"ddtpp 2\n",
		"weft 1\n",
		"ddtpp 1\ncase a s 1 8 4 4 8 10 1\n",   // short case line
		"ddtpp 1\ncase a s 1 8 4 4 8 10 1 x\n", // not a number
		"ddtpp 1\ncase a s 1 8 4 4 8 0 1 1\ntype 0 named int32\n", // no iterations
		"ddtpp 1\ncase a s 1 8 4 4 8 10 1 2\ntype 0 named int32\n",
		"ddtpp 1\ncase a s 1 8 4 4 8 10 1 1\ntype 1 named int32\n",
		"ddtpp 1\ntype 0 named int32\n",
		"ddtpp 1\ncase a s 1 8 4 4 8 10 1 1\ntype 0 named int32\nextra\n",
		"ddtpp 1\n\n",
	} {
		if _, err := readRecipe(strings.NewReader(bad)); !errors.Is(err, errRecipe) {
			t.Errorf("%q: %v, want %v", bad, err, errRecipe)
		}
	}
	for _, bad := range []string{
		"named int128",
		"vector 1 1 2 5",         // undefined reference
		"vector 1 1 x 0",         // not a number
		"vector 1 1 2",           // too few
		"vector 1 1 2 0 0",       // too many
		"indexed 99 1 0",         // count beyond the line
		"subarray 1 4 2 1 up 0",  // bad order
		"subarray 1 4 2 1",       // no order
		"resized 0 8 0 extra",    // left over
		"helix 1 0",              // unknown kind
		"vector -1 1 2 0",        // ddt refuses
		"struct 2 1 1 0 8 0",     // one type for two members
		"hindexed_block 1 1 0 7", // undefined reference
	} {
		rp := &recipe{cases: []recipeCase{{name: "x", size: "s"}}, types: [][][]string{{{"named", "int32"}, strings.Fields(bad)}}}
		if _, err := rp.buildType(0); !errors.Is(err, errRecipe) {
			t.Errorf("%q: %v, want %v", bad, err, errRecipe)
		}
	}
}

const jobOut = `launcher chatter
SUM pack a s 00000000000000ff
SUM unpack a s 0000000000000100
RESULT typed a s 2.5
RESULT manual a s 2.0
RESULT contig a s 1.0
RESULT pack a s 0.5
RESULT unpack a s 0.75
JIT state a s compiled
`

// mpiOut is an MPI job's output of the case of jobOut: the typed
// ping-pong, then the contiguous one of the same bytes.
const mpiOut = `SUM pack a s 00000000000000ff
SUM unpack a s 0000000000000100
RESULT mpi a s 4.25
RESULT mpicontig a s 0.75
`

func TestParseOutput(t *testing.T) {
	o, err := parseOutput([]byte(jobOut))
	if err != nil {
		t.Fatal(err)
	}
	if o.sums["a/s"] != (sums{0xff, 0x100}) || o.lat[[2]string{"typed", "a/s"}] != 2.5 || o.jit["a/s"] != "compiled" ||
		!slices.Equal(o.cols, []string{"typed", "manual", "contig", "pack", "unpack"}) || o.lat[[2]string{"unpack", "a/s"}] != 0.75 {
		t.Errorf("parsed %+v", o)
	}
	o, err = parseOutput([]byte(mpiOut))
	if err != nil {
		t.Fatal(err)
	}
	if o.lat[[2]string{"mpi", "a/s"}] != 4.25 || o.lat[[2]string{"mpicontig", "a/s"}] != 0.75 || !slices.Equal(o.cols, []string{"mpi", "mpicontig"}) {
		t.Errorf("parsed MPI output %+v", o)
	}
	var names []string
	for _, col := range o.cols {
		names = append(names, colName(col, "mpich"))
	}
	if !slices.Equal(names, []string{"mpich", "mpich-contig"}) {
		t.Errorf("MPI contenders named %v, want [mpich mpich-contig]", names)
	}
	for _, bad := range []string{
		"SUM pack a s 00ff\n", "SUM pack a s 00000000000000fg\n", "SUM both a s 00000000000000ff\n",
		"RESULT typed a s 0\n", "RESULT typed a s -1\n", "RESULT typed a s NaN\n", "RESULT typed a s fast\n",
		"RESULT typed a s 1\nRESULT typed a s 2\n", "JIT state a s maybe\n",
	} {
		if _, err := parseOutput([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCheck(t *testing.T) {
	c, err := ddtcases.Build("nas_mg_x", "s")
	if err != nil {
		t.Fatal(err)
	}
	c.Name = "a" // as in jobOut
	cases := []*ddtcases.Case{c}
	want := map[string]sums{"a/s": {0xff, 0x100}}
	o, err := parseOutput([]byte(jobOut))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.check(cases, want, true); err != nil {
		t.Errorf("good output: %v", err)
	}
	if err := o.check(cases, want, false); err == nil {
		t.Error("a weft output passed as an MPI's (no mpi result)")
	}
	om, err := parseOutput([]byte(mpiOut))
	if err != nil {
		t.Fatal(err)
	}
	if err := om.check(cases, want, false); err != nil {
		t.Errorf("good MPI output: %v", err)
	}
	if err := om.check(cases, want, true); err == nil {
		t.Error("an MPI output passed as weft's")
	}
	om, _ = parseOutput([]byte(strings.Replace(mpiOut, "RESULT mpicontig a s 0.75\n", "", 1)))
	if err := om.check(cases, want, false); err == nil || !strings.Contains(err.Error(), "no mpicontig result") {
		t.Errorf("MPI output without its contiguous ping-pong: %v", err)
	}
	if err := o.check(cases, map[string]sums{"a/s": {0xff, 0x101}}, true); !errors.Is(err, errMismatch) {
		t.Errorf("wrong unpack hash: %v", err)
	}
	if err := o.check(cases, map[string]sums{"a/s": {0xfe, 0x100}}, true); !errors.Is(err, errMismatch) {
		t.Errorf("wrong pack hash: %v", err)
	}
	o2, _ := parseOutput([]byte(strings.Replace(jobOut, "JIT state a s compiled\n", "", 1)))
	if err := o2.check(cases, want, true); err == nil {
		t.Error("weft output without its JIT line accepted")
	}
	// The expected hashes are ddt's: pack of pattern 1, unpack of pattern 2
	// into zeros.
	s, err := expectedSums(cases)
	if err != nil {
		t.Fatal(err)
	}
	typed := make([]byte, c.Typed)
	ddtcases.Fill(typed, 1)
	packed := make([]byte, c.Bytes)
	p, _ := c.Bind(packed, typed)
	p()
	if s["a/s"].pack != hash(packed) {
		t.Error("expected pack hash is not the hash of the hand-packed stream")
	}
}

// TestAggregate: ratios are taken within each repetition, the best MPI per
// repetition, medians over repetitions; the summaries pick the worst
// typed ÷ manual cell, the geomean of typed ÷ contig over the cells of at
// least 64 KiB and of typed ÷ best MPI over all, and, for information, of
// the floor (the fastest contiguous send of each repetition) ÷ best MPI.
func TestAggregate(t *testing.T) {
	small, _ := ddtcases.Build("milc_su3_zd", "s") // 1536 B
	big, _ := ddtcases.Build("fft2", "s")          // 64 KiB
	cfg := &config{cases: []*ddtcases.Case{small, big}, reps: 3}
	res := newResults(3)
	nan := math.NaN()
	set := func(col, cell string, v ...float64) {
		for i, x := range v {
			if !math.IsNaN(x) {
				res.Add([2]string{col, cell}, i, x)
			}
		}
	}
	s, b := small.String(), big.String()
	// A slow repetition 2 hits everything alike.
	set("typed", s, 2, 6, 2.4)
	set("manual", s, 1, 3, 2)
	set("contig", s, 1, 3, 1)
	set("mpich", s, 4, 12, 4)
	set("openmpi", s, 5, 10, nan)
	set("typed", b, 10, 30, 12)
	set("manual", b, 20, 60, 24)
	set("contig", b, 5, 20, 8)
	set("mpich", b, 40, 100, 30)
	set("openmpi", b, 30, 120, 36)
	set("mpich-contig", s, 0.8, 3.5, 1.2)
	set("openmpi-contig", s, 1.5, 2, nan)
	set("mpich-contig", b, 6, 15, nan) // no openmpi-contig at all
	set("pack", s, 0.5, 1, 0.3)
	set("unpack", s, 0.4, 2, 0.2)
	set("pack", b, 6, 25, 9)
	set("unpack", b, 7, 18, 10)
	rp := &report{cfg: cfg, res: res, mpis: []string{"mpich", "openmpi"}, jit: map[string]string{s: "compiled", b: "interpreted"}}
	if got := res.Best(keys(rp.mpis, s), true); !slices.Equal(got, []float64{4, 10, 4}) {
		t.Errorf("best MPI %v", got)
	}
	by := map[string]benchrec.Record{}
	for _, r := range rp.records() {
		by[r.Key()] = r
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// typed ÷ manual per repetition: 2, 2, 1.2 → 2.
	if r := by["ddtpp/milc_su3_zd/s/typed-vs-manual"]; !near(r.Ratio, 2) || r.Ref != "manual" || r.RefValue != 2 || r.Value != 2.4 || r.Bytes != 1536 || r.Unit != "us" {
		t.Errorf("typed-vs-manual %+v", r)
	}
	// typed ÷ best MPI: 2/4, 6/10, 2.4/4 → 0.6.
	if r := by["ddtpp/milc_su3_zd/s/typed-vs-mpi"]; !near(r.Ratio, 0.6) || r.Ref != "best MPI" || r.RefValue != 4 {
		t.Errorf("typed-vs-mpi %+v", r)
	}
	if r := by["ddtpp/milc_su3_zd/s/openmpi"]; r.Reps != 2 || r.Value != 7.5 || r.Ratio != 0 {
		t.Errorf("openmpi %+v", r)
	}
	if r := by["ddtpp/fft2/s/typed"]; r.Note != "jit interpreted" || r.Value != 12 {
		t.Errorf("typed %+v", r)
	}
	// The floor, fastest of contig and the MPIs' contiguous sends: 0.8, 2,
	// 1 → 1; ÷ best MPI 4, 10, 4: 0.2, 0.2, 0.25 → 0.2.
	if r := by["ddtpp/milc_su3_zd/s/floor-vs-mpi"]; !near(r.Ratio, 0.2) || r.Value != 1 || r.Ref != "best MPI" || r.RefValue != 4 || r.Reps != 3 ||
		r.Note != "floor: fastest of contig, mpich-contig, openmpi-contig" {
		t.Errorf("floor-vs-mpi %+v", r)
	}
	// fft2: floor 5, 15, 8 → 8; ÷ best MPI 30, 100, 30: 1/6, 0.15, 4/15 → 1/6.
	if r := by["ddtpp/fft2/s/floor-vs-mpi"]; !near(r.Ratio, 1.0/6) || r.Value != 8 || r.RefValue != 30 {
		t.Errorf("fft2 floor-vs-mpi %+v", r)
	}
	if r := by["ddtpp/milc_su3_zd/s/openmpi-contig"]; r.Reps != 2 || r.Value != 1.75 {
		t.Errorf("openmpi-contig %+v", r)
	}
	if r := by["ddtpp/fft2/s/mpich-contig"]; r.Reps != 2 || r.Value != 10.5 {
		t.Errorf("mpich-contig %+v", r)
	}
	// The packing floor, the slower pass: milc 0.5, 2, 0.3 → 0.5; ÷
	// contig 0.5, 2/3, 0.3 → 0.5. fft2 7, 25, 10 → 10; ÷ contig 1.4, 1.25,
	// 1.25 → 1.25.
	if r := by["ddtpp/milc_su3_zd/s/packfloor-vs-contig"]; !near(r.Ratio, 0.5) || r.Value != 0.5 || r.Ref != "contig" || r.RefValue != 1 {
		t.Errorf("packfloor-vs-contig %+v", r)
	}
	if r := by["ddtpp/fft2/s/packfloor-vs-contig"]; !near(r.Ratio, 1.25) || r.Value != 10 || r.RefValue != 8 {
		t.Errorf("fft2 packfloor-vs-contig %+v", r)
	}
	// 9 figures (7 contenders, 2 passes), 3 comparisons of typed, the
	// packing floor's and the floor's; fft2 without openmpi-contig.
	if len(by) != 14+13 {
		t.Errorf("%d records, want 14 and 13", len(by))
	}
	sum := rp.summaries()
	// Worst typed ÷ manual: milc 2 (fft2: 0.5).
	if !near(sum[0].value, 2) || sum[0].where != "milc_su3_zd s" {
		t.Errorf("worst %+v", sum[0])
	}
	// typed ÷ contig ≥ 64 KiB: fft2 only, 2, 1.5, 1.5 → 1.5.
	if !near(sum[1].value, 1.5) || sum[1].where != "1 cells" {
		t.Errorf("contig geomean %+v", sum[1])
	}
	// typed ÷ best MPI: milc 0.6, fft2 10/30, 30/100, 12/30 → 1/3; geomean √0.2.
	if !near(sum[2].value, math.Sqrt(0.6/3)) {
		t.Errorf("MPI geomean %+v", sum[2])
	}
	// floor ÷ best MPI: milc 0.2, fft2 1/6; geomean √(1/30), no target.
	if len(sum) != 6 || !near(sum[3].value, math.Sqrt(1.0/30)) || !sum[3].info || sum[3].where != "2 cells" {
		t.Errorf("floor geomean %+v", sum)
	}
	// Lowest, max(floor, packing floor): milc 0.8, 2, 1 (the floor);
	// fft2 7, 25, 10. ÷ contig ≥ 64 KiB: fft2's 1.4, 1.25, 1.25 → 1.25.
	if !near(sum[4].value, 1.25) || !sum[4].info || sum[4].where != "1 cells" {
		t.Errorf("lowest ÷ contig %+v", sum[4])
	}
	// ÷ best MPI: milc 0.2, 0.2, 0.25 → 0.2; fft2 7/30, 0.25, 1/3 → 0.25.
	if !near(sum[5].value, math.Sqrt(0.2*0.25)) || !sum[5].info || sum[5].where != "2 cells" {
		t.Errorf("lowest ÷ best MPI %+v", sum[5])
	}
	var out bytes.Buffer
	rp.print(&out)
	tooltest.Contains(t, out.String(),
		"typed ÷ manual, worst cell (target ≤ 1.0): NOT met (2.000, milc_su3_zd s)",
		"typed ÷ contig, geomean of the cells ≥ 64 KiB (target ≤ 1.15): NOT met (1.500, 1 cells)",
		"typed ÷ best MPI, geomean of all cells (target ≤ 0.5): met (0.447, 2 cells)",
		"floor (fastest contiguous send of the same bytes) ÷ best MPI typed, geomean of all cells: floor 0.183 (2 cells)",
		"a typed send cannot beat a contiguous send of its bytes",
		"lowest (max of the floor, pack and unpack) ÷ contig, geomean of the cells ≥ 64 KiB: floor 1.250 (1 cells)",
		"    contig      pack    unpack     mpich",
		"floor/MPI: the fastest of contig, mpich-contig, openmpi-contig ÷ the best MPI",
		"    mpich   openmpi mpich-contig openmpi-contig  /manual",
		"1.750     2.00     2.00     0.60      0.20 compiled\n",
		"–     0.50     1.50     0.33      0.17 interpreted\n")
	// Without an MPI there is no floor ÷ best MPI to take.
	rp.mpis = nil
	if sum := rp.summaries(); !math.IsNaN(sum[3].value) || !math.IsNaN(sum[5].value) {
		t.Errorf("floor geomeans without MPI %+v", sum)
	}
	for _, r := range rp.records() {
		if slices.Contains([]string{"mpich-contig", "openmpi-contig", "floor-vs-mpi"}, r.Metric) {
			t.Errorf("record %s without MPI", r.Key())
		}
	}
}

// TestRunsSideBySide builds the tool and fabrun and runs it end to end on
// the small size with a few round trips: every job checks every layout
// against ddt's (the MPIs' datatypes built from the recipe included), the
// table has a row per case with the three ratios, the -json records are
// well formed, the temporary directory is removed, and bad command lines
// are refused with status 2. The figures are not checked (timings on a
// shared machine are anything).
func TestRunsSideBySide(t *testing.T) {
	tool := tooltest.New(t, "ddtpp", "builds and runs the benchmark tool with MPI jobs", 4*time.Minute)
	tool.Args = []string{"-iters", "20", "-miniters", "5", "-timeout", "60s"}
	jobs := []string{"weft", "mpich"}
	if _, err := exec.LookPath("mpirun.openmpi"); err == nil {
		jobs = append(jobs, "openmpi")
	}

	t.Run("table", func(t *testing.T) {
		out, progress := tool.Run(t, "-reps", "2", "-sizes", "s")
		for _, rep := range []string{"1", "2"} {
			for _, j := range jobs {
				if !regexp.MustCompile(`(?m)^rep ` + rep + ` ` + j + `: `).MatchString(progress) {
					t.Errorf("no progress line for rep %s %s:\n%s", rep, j, progress)
				}
			}
		}
		row := regexp.MustCompile(`(?m)^(\S+) +s +\d+((?: +[0-9.]+)+) +(compiled|interpreted)$`)
		rows := row.FindAllStringSubmatch(out, -1)
		if len(rows) != len(ddtcases.Names()) {
			t.Fatalf("%d table rows, want %d:\n%s", len(rows), len(ddtcases.Names()), out)
		}
		for _, r := range rows {
			// weft's 3 and its 2 passes, each MPI's typed and
			// contiguous, 4 ratios.
			if want := 5 + 2*(len(jobs)-1) + 4; len(strings.Fields(r[2])) != want {
				t.Errorf("row %q: %d figures, want %d", r[0], len(strings.Fields(r[2])), want)
			}
		}
		if !strings.Contains(out, "targets (issue 20):") || strings.Contains(out, "not measured") || !strings.Contains(out, "geomean of all cells: floor ") {
			t.Errorf("targets and floor not all measured:\n%s", out)
		}
		for _, j := range jobs[1:] {
			if !regexp.MustCompile(`(?m)^rep 1 ` + j + `: .* ` + j + `-contig [0-9.]+ us \(geomean\)`).MatchString(progress) {
				t.Errorf("no %s-contig figure in the progress lines:\n%s", j, progress)
			}
		}
	})

	t.Run("json", func(t *testing.T) {
		out, _ := tool.Run(t, "-reps", "1", "-sizes", "s", "-cases", "^(milc_su3_zd|fft2)$", "-json")
		keys := map[string]bool{}
		for _, r := range tooltest.Records(t, out) {
			if r.Tool != "ddtpp" || r.Area != "ddtpp" || r.Reps != 1 || r.Stat != "median" || r.Value <= 0 || r.Unit != "us" || r.Bytes <= 0 || r.Machine == "" {
				t.Errorf("record %+v: fields missing or wrong", r)
			}
			if strings.Contains(r.Metric, "-vs-") && (r.Ref == "" || r.Ratio <= 0 || r.RefValue <= 0) {
				t.Errorf("record %+v: comparison without reference or ratio", r)
			}
			keys[r.Key()] = true
		}
		for _, k := range []string{"ddtpp/fft2/s/typed", "ddtpp/fft2/s/manual", "ddtpp/fft2/s/contig", "ddtpp/fft2/s/mpich",
			"ddtpp/fft2/s/typed-vs-manual", "ddtpp/fft2/s/typed-vs-contig", "ddtpp/fft2/s/typed-vs-mpi", "ddtpp/milc_su3_zd/s/typed",
			"ddtpp/fft2/s/mpich-contig", "ddtpp/fft2/s/floor-vs-mpi"} {
			if !keys[k] {
				t.Errorf("no record %s in\n%s", k, out)
			}
		}
	})

	t.Run("bad command lines", func(t *testing.T) {
		tool.RefusesUsage(t, [][]string{{"-sizes", "xl"}, {"-cases", "("}, {"-reps", "0"}, {"-ref", "lam"}, {"-timeout", "0s"},
			{"-transport", "a=b"}, {"stray"}, {"-role", "weft"}, {"-role", "weft", "recipe", "0"}, {"-role", "dance"}})
	})
}

// TestLayoutsAgree runs every case at the medium and large sizes once
// (TestRunsSideBySide's table runs the small one), one round trip each:
// the weft job and every MPI found here exchange each layout's packed
// stream and unpacked buffer and the driver checks their hashes against
// ddt's Pack and Unpack, so the weft types and the MPI types the recipe
// builds pack byte for byte alike.
func TestLayoutsAgree(t *testing.T) {
	tool := tooltest.New(t, "ddtpp", "runs every DDTBench layout through weft and MPI jobs", 4*time.Minute)
	out, _ := tool.Run(t, "-reps", "1", "-sizes", "m,l", "-iters", "1", "-miniters", "1", "-rounds", "1", "-timeout", "2m")
	want := 0
	for _, c := range ddtcases.All() {
		if c.Size != "s" {
			want++
		}
	}
	if n := strings.Count(out, " compiled\n") + strings.Count(out, " interpreted\n"); n != want {
		t.Errorf("%d table rows, want %d:\n%s", n, want, out)
	}
}
