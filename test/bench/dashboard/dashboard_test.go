package main

import (
	"bytes"
	"errors"
	"github.com/weft-hpc/weft/internal/benchrec"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), c.in...)
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
		if !slicesEqual(in, c.in) {
			t.Errorf("median reordered its argument: %v", c.in)
		}
	}
}

func slicesEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

const pingpongRun = `{"tool":"pingpong","area":"fabric","case":"batch","size":"8","metric":"lat","value":1.2,"unit":"us","ref":"fi_pingpong","ref_value":1.1,"ratio":1.09,"reps":9,"stat":"median","commit":"abc","machine":"cpu, 2 CPUs","go":"go1.26.8"}

{"tool":"pingpong","area":"fabric","case":"batch","size":"1048576","metric":"bw","value":11000,"unit":"MB/s","ref":"fi_pingpong","ref_value":11500,"ratio":0.96,"reps":9,"stat":"median"}
`

func TestParseRecords(t *testing.T) {
	rs, err := parseJSON(strings.NewReader(pingpongRun))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("got %d records, want 2", len(rs))
	}
	r := rs[0]
	if r.Key() != "pingpong/batch/8/lat" || r.Value != 1.2 || r.RefValue != 1.1 || r.Ratio != 1.09 || r.Reps != 9 || r.Commit != "abc" {
		t.Errorf("record %+v", r)
	}
}

func TestParseRejectsBadLines(t *testing.T) {
	for _, bad := range []string{
		`not json`,
		`{"tool":"pingpong","case":"batch","metric":"lat","value":"fast"}`,
		`{"tool":"pingpong","case":"batch","metric":"lat","value":1,"colour":"red"}`,
		`{"tool":"pingpong","metric":"lat","value":1}`,
		`{"something":1}`,
		`{"case":"fft2","size":"s","engine":"jit","ns":3}`,
	} {
		if _, err := parseJSON(strings.NewReader(bad + "\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%s: err %v, want an error naming line 1", bad, err)
		}
	}
}

// ddtRun is one ddtbench run of two cells.
const ddtRun = `{"case":"fft2","size":"s","bytes":65536,"engine":"manual","op":"pack","ns":300}
{"case":"fft2","size":"s","bytes":65536,"engine":"manual","op":"unpack","ns":200}
{"case":"fft2","size":"s","bytes":65536,"engine":"interp","op":"pack","ns":600}
{"case":"fft2","size":"s","bytes":65536,"engine":"interp","op":"unpack","ns":400}
{"case":"fft2","size":"s","bytes":65536,"engine":"jit","op":"pack","ns":100,"compile_ns":2000}
{"case":"fft2","size":"s","bytes":65536,"engine":"jit","op":"unpack","ns":50,"compile_ns":2000}
{"case":"milc_su3_zd","size":"s","bytes":4608,"engine":"manual","op":"pack","ns":40}
{"case":"milc_su3_zd","size":"s","bytes":4608,"engine":"interp","op":"pack","ns":80}
{"case":"milc_su3_zd","size":"s","bytes":4608,"engine":"jit","op":"pack","ns":20,"compile_ns":4000}
`

func TestDDTBenchLines(t *testing.T) {
	rs, err := parseJSON(strings.NewReader(ddtRun))
	if err != nil {
		t.Fatal(err)
	}
	by := index(rs)
	if r := by["ddtbench/fft2/s/interp-pack"]; r.Ratio != 2 || r.Ref != "manual" || r.Area != "ddt" {
		t.Errorf("interp pack: %+v", r)
	}
	if r := by["ddtbench/fft2/s/jit-unpack"]; r.Ratio != 0.25 || r.Area != "jit" {
		t.Errorf("jit unpack: %+v", r)
	}
	if r, ok := by["ddtbench/fft2/s/jit-compile"]; !ok || r.Value != 2000 {
		t.Errorf("jit compile: %+v", r)
	}
	n := 0
	for _, r := range rs {
		if r.Metric == "jit-compile" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d compile records, want one per case and size", n)
	}
	d := index(derive(aggregate(rs)))
	for k, want := range map[string]float64{
		"ddtbench/summary/all/interp-worst":       2,
		"ddtbench/summary/all/interp-geomean":     2,
		"ddtbench/summary/all/jit-fft2-min":       3, // hand 300 ÷ jit 100 on pack
		"ddtbench/summary/all/jit-speedup-fft2":   7, // 6 and 8
		"ddtbench/summary/all/jit-speedup-min":    4, // milc only
		"ddtbench/summary/all/jit-compile-median": 3, // µs
		"ddtbench/summary/all/jit-reuses-median":  0, // set below
	} {
		r, ok := d[k]
		if !ok {
			t.Errorf("%s not derived", k)
			continue
		}
		if k == "ddtbench/summary/all/jit-reuses-median" {
			want = (2000.0/500 + 4000.0/60) / 2
		}
		if math.Abs(r.Value-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, r.Value, want)
		}
	}
	if w := d["ddtbench/summary/all/jit-worst"]; w.Value != 0.5 || w.Note != "milc_su3_zd s pack" {
		t.Errorf("jit worst %+v", w)
	}
}

func TestGoBench(t *testing.T) {
	out := `goos: linux
pkg: github.com/weft-hpc/weft/ddt
BenchmarkCommit/milc-2         	   20000	       730 ns/op	       550.0 cpu-ns/op	     512 B/op	       7 allocs/op
BenchmarkCommit/specfem-2      	   20000	      4051 ns/op	      2894 cpu-ns/op	     900 B/op	      15 allocs/op
BenchmarkCommit/specfem-2      	   20000	      4000 ns/op	      2900 cpu-ns/op	     900 B/op	      15 allocs/op
PASS
`
	rs, err := parseGoBench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	d := index(derive(aggregate(rs)))
	r, ok := d["gobench/Commit/all/cpu-us-max"]
	if !ok || math.Abs(r.Value-2.897) > 1e-9 || r.Note != "specfem" || r.Area != "ddt" {
		t.Errorf("commit max: %+v", r)
	}
	if _, err := parseGoBench(strings.NewReader("BenchmarkX-2 10 5 ns/op 7\n")); err == nil {
		t.Error("odd value/unit list accepted")
	}
}

func TestAggregateMedians(t *testing.T) {
	var rs []benchrec.Record
	for i, v := range []float64{1.3, 1.1, 1.2} {
		rs = append(rs, benchrec.Record{Tool: "pingpong", Case: "batch", Size: "8", Metric: "lat", Value: v, RefValue: 1, Ratio: v, Reps: 9, Commit: []string{"a", "b", "a"}[i]})
	}
	rs = append(rs, benchrec.Record{Tool: "pingpong", Case: "batch", Size: "8", Metric: "bw", Value: 5, Reps: 9})
	a := aggregate(rs)
	if len(a) != 2 {
		t.Fatalf("%d groups, want 2", len(a))
	}
	if a[0].Value != 1.2 || a[0].Ratio != 1.2 || a[0].RefValue != 1 || a[0].Reps != 27 || a[0].Runs != 3 || a[0].Commit != "a, b" {
		t.Errorf("aggregate %+v", a[0])
	}
	if a[1].Ratio != 0 || a[1].RefValue != 0 {
		t.Errorf("a record without reference got one: %+v", a[1])
	}
}

func TestStatus(t *testing.T) {
	by := map[string]benchrec.Record{
		"k/le": {Ratio: 1.1, Value: 5},
		"k/ge": {Value: 0.93},
		"k/no": {Value: 3}, // no ratio
	}
	for _, c := range []struct {
		t    Target
		want string
	}{
		{Target{Key: "k/le", Field: "ratio", Op: "<=", Limit: 1.15}, statusMet},
		{Target{Key: "k/le", Field: "ratio", Op: "<=", Limit: 1.1}, statusMet}, // the threshold itself meets
		{Target{Key: "k/le", Field: "ratio", Op: "<=", Limit: 1.05}, statusNotMet},
		{Target{Key: "k/le", Field: "value", Op: "<=", Limit: 1.05}, statusNotMet},
		{Target{Key: "k/ge", Field: "value", Op: ">=", Limit: 0.9}, statusMet},
		{Target{Key: "k/ge", Field: "value", Op: ">=", Limit: 0.95}, statusNotMet},
		{Target{Key: "k/no", Field: "ratio", Op: "<=", Limit: 2}, statusNoData},
		{Target{Key: "missing", Field: "value", Op: "<=", Limit: 2}, statusNoData},
	} {
		_, got, err := c.t.evaluate(by)
		if err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.t, got, err, c.want)
		}
	}
	if _, _, err := (Target{Key: "k/le", Op: "<"}).evaluate(by); err == nil {
		t.Error("unknown operator accepted")
	}
}

// TestTargetsWellFormed: every target reads a ratio or a value with a
// known operator, names its key as tool/case/size/metric, and the keys
// are distinct.
func TestTargetsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, tg := range targets {
		if (tg.Field != "ratio" && tg.Field != "value") || (tg.Op != "<=" && tg.Op != ">=") || strings.Count(tg.Key, "/") != 3 || tg.Limit <= 0 {
			t.Errorf("target %+v", tg)
		}
		if seen[tg.Key] {
			t.Errorf("key %s used twice", tg.Key)
		}
		seen[tg.Key] = true
	}
}

const doc = `# page

intro kept as is
<!-- dashboard:targets begin -->
stale
<!-- dashboard:targets end -->
middle
<!-- dashboard:fabric begin --><!-- dashboard:fabric end -->
tail
`

func TestRewriteIdempotent(t *testing.T) {
	rs, err := parseJSON(strings.NewReader(pingpongRun))
	if err != nil {
		t.Fatal(err)
	}
	rs = aggregate(rs)
	once, err := rewrite(doc, rs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(once, "stale") {
		t.Errorf("old section text kept:\n%s", once)
	}
	wantAll(t, "output", once, "# page\n\nintro kept as is\n", "\nmiddle\n", "\ntail\n",
		"| fabric | 8 B half round trip ≤ 1.15× fi_pingpong (shm) | `pingpong/batch/8/lat` | ratio | ≤ 1.150 | 1.090 | met |",
		"| fabric | 1 MiB bandwidth ≥ 0.95× fi_pingpong (shm) | `pingpong/batch/1048576/bw` | ratio | ≥ 0.950 | 0.960 | met |",
		"| endpoint | 8 B latency ≤ 1.10× raw fabric/ (shm) | `endpoint/pingpong/8/lat` | ratio | ≤ 1.100 | – | not measured |",
		"| batch | 8 | lat | 1.200 | us | fi_pingpong | 1.100 | 1.090 | 9 | – |")
	twice, err := rewrite(once, rs)
	if err != nil {
		t.Fatal(err)
	}
	if twice != once {
		t.Errorf("second rewrite changed the page:\n%s\n---\n%s", once, twice)
	}
}

func TestRewriteBadMarkers(t *testing.T) {
	for _, bad := range []string{
		"no markers",
		"<!-- dashboard:targets begin -->\n",
		"<!-- dashboard:targets end -->\n",
		"<!-- dashboard:targets begin -->\n<!-- dashboard:fabric end -->\n",
		"<!-- dashboard:nosuch begin -->\n<!-- dashboard:nosuch end -->\n",
	} {
		if _, err := rewrite(bad, nil); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestRunCheck runs the command over a directory: it writes the page, a
// second run with -check finds it up to date, and -check fails on a page
// edited inside a generated section.
func TestRunCheck(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"pingpong.json": pingpongRun, "ddt1.json": ddtRun, "ddt2.json": ddtRun, "notes.txt": "ignored"} {
		if err := os.WriteFile(filepath.Join(data, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	page := filepath.Join(dir, "PERF.md")
	if err := os.WriteFile(page, []byte(doc+"<!-- dashboard:ddt begin -->\n<!-- dashboard:ddt end -->\n<!-- dashboard:machine begin -->\n<!-- dashboard:machine end -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if err := run([]string{"-doc", page, data}, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, &stderr)
	}
	got, _ := os.ReadFile(page)
	wantAll(t, "page", string(got), "| summary | all | jit-geomean |", "| fabric | cpu, 2 CPUs | abc | go1.26.8 |",
		"| jit | cpu, 2 CPUs | abc | go1.26.8 |")
	if err := run([]string{"-doc", page, "-check", data}, &stderr); err != nil {
		t.Errorf("-check after a write: %v", err)
	}
	edited := strings.Replace(string(got), "| met |", "| not quite |", 1)
	if err := os.WriteFile(page, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-doc", page, "-check", data}, &stderr); !errors.Is(err, errStale) {
		t.Errorf("-check on an edited page: %v, want %v", err, errStale)
	}
	for _, args := range [][]string{{"-doc", page}, {"-doc", page, filepath.Join(dir, "missing")}, {"-doc", page, dir}} {
		if err := run(args, &stderr); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// dashboardDirs hold the committed runs whose figures docs/PERFORMANCE.md
// shows: the last full run.
var dashboardDirs = []string{"testdata/baseline"}

// notInBaseline are the targets whose record the committed runs predate,
// with the reason: the page shows them as not measured until the next full
// run (make bench-dashboard) replaces the baseline.
var notInBaseline = map[string]string{}

// TestBaselineParses: the committed runs' figures load and give every target
// a status (the targets of notInBaseline may lack their record).
func TestBaselineParses(t *testing.T) {
	var rs []benchrec.Record
	for _, d := range dashboardDirs {
		r, err := loadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r...)
	}
	rs = aggregate(rs)
	rs = append(rs, derive(rs)...)
	by := index(rs)
	for _, tg := range targets {
		_, st, err := tg.evaluate(by)
		if why, ok := notInBaseline[tg.Key]; ok && err == nil && st == statusNoData {
			t.Logf("target %q not measured: %s", tg.What, why)
			continue
		}
		if err != nil || st == statusNoData {
			t.Errorf("target %q: %q, %v", tg.What, st, err)
		}
	}
}

// TestPageMatchesBaseline: docs/PERFORMANCE.md shows exactly the figures of
// the runs committed in dashboardDirs, so no table is edited by hand.
func TestPageMatchesBaseline(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(append([]string{"-check", "-doc", "../../../docs/PERFORMANCE.md"}, dashboardDirs...), &stderr); err != nil {
		t.Fatalf("docs/PERFORMANCE.md differs from %v: %v\n%s", dashboardDirs, err, &stderr)
	}
}

// p2pRun is one run of test/bench/p2p: two sizes, one rate case.
const p2pRun = `{"tool":"p2p","area":"p2p","case":"weft","size":"8","metric":"lat","value":0.9,"unit":"us","ref":"best MPI","ref_value":0.3,"ratio":3,"reps":5,"stat":"median"}
{"tool":"p2p","area":"p2p","case":"mpich","size":"8","metric":"lat","value":0.35,"unit":"us","reps":5,"stat":"median"}
{"tool":"p2p","area":"p2p","case":"openmpi","size":"8","metric":"lat","value":0.3,"unit":"us","reps":5,"stat":"median"}
{"tool":"p2p","area":"p2p","case":"weft","size":"65536","metric":"bw","value":9000,"unit":"MB/s","ref":"best of MPI, fi_pingpong","ref_value":18000,"ratio":0.5,"reps":5,"stat":"median"}
{"tool":"p2p","area":"p2p","case":"weft","size":"4194304","metric":"bw","value":12000,"unit":"MB/s","ref":"best of MPI, fi_pingpong","ref_value":15000,"ratio":0.8,"reps":5,"stat":"median"}
{"tool":"p2p","area":"p2p","case":"weft","size":"4096","metric":"bw","value":100,"unit":"MB/s","ref":"best of MPI, fi_pingpong","ref_value":1000,"ratio":0.1,"reps":5,"stat":"median"}
{"tool":"p2p","area":"p2p","case":"fi_pingpong","size":"65536","metric":"bw","value":14000,"unit":"MB/s","reps":5,"stat":"median"}
{"tool":"p2p","area":"p2p","case":"weft-rate2ep","size":"8","metric":"msgrate","value":3000000,"unit":"msg/s","ref":"best MPI 2 senders","ref_value":2000000,"ratio":1.6,"reps":5,"stat":"median"}
`

// TestP2P: the weakest bandwidth ratio at 64 KiB and above is derived for
// its target (4 KiB does not count), and the p2p section has one row per
// figure with a column per contender.
func TestP2P(t *testing.T) {
	rs, err := parseJSON(strings.NewReader(p2pRun))
	if err != nil {
		t.Fatal(err)
	}
	rs = aggregate(rs)
	rs = append(rs, derive(rs)...)
	by := index(rs)
	if r := by["p2p/weft/64k-up/bw-ratio-min"]; r.Value != 0.5 || r.Note != "at 65536 B" || r.Area != "p2p" {
		t.Errorf("derived bandwidth ratio %+v", r)
	}
	if _, st, _ := (Target{Key: "p2p/weft-rate2ep/8/msgrate", Field: "ratio", Op: ">=", Limit: 1.5}).evaluate(by); st != statusMet {
		t.Errorf("2ep target: %s", st)
	}
	tab, err := p2pTable(rs)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "table", tab,
		"| metric | size or case | weft | weft ÷ reference | fi_pingpong | mpich | openmpi | reference | reference value | reps |",
		"| lat (us) | 8 | 0.900 | 3.000 | – | 0.350 | 0.300 | best MPI | 0.300 | 5 |",
		"| bw (MB/s) | 65536 | 9000 | 0.500 | 14000 | – | – | best of MPI, fi_pingpong | 18000 | 5 |",
		"| msgrate (msg/s) | 2ep | 3000000 | 1.600 | – | – | – | best MPI 2 senders | 2000000 | 5 |")
	if strings.Contains(tab, "64k-up") {
		t.Errorf("derived record shown as a row:\n%s", tab)
	}
	page, err := rewrite("<!-- dashboard:p2p begin -->\n<!-- dashboard:p2p end -->\n", rs)
	if err != nil || !strings.Contains(page, tab) {
		t.Errorf("p2p section (a marker name with a digit) not filled: %v\n%s", err, page)
	}
}

// ddtppRun is one run of test/bench/ddtpp: two cells, one below 64 KiB,
// with the MPIs' contiguous sends and the floor (ddtppFloor).
const ddtppRun = ddtppTyped + ddtppFloor

// ddtppTyped is a run without the MPIs' contiguous sends, as before they
// were measured: no floor.
const ddtppTyped = `{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"typed","value":2,"unit":"us","reps":5,"stat":"median","note":"jit compiled"}
{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"manual","value":1,"unit":"us","reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"contig","value":0.5,"unit":"us","reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"mpich","value":4,"unit":"us","reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"openmpi","value":5,"unit":"us","reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"typed-vs-manual","value":2,"unit":"us","ref":"manual","ref_value":1,"ratio":2,"reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"typed-vs-contig","value":2,"unit":"us","ref":"contig","ref_value":0.5,"ratio":4,"reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"typed-vs-mpi","value":2,"unit":"us","ref":"best MPI","ref_value":4,"ratio":0.5,"reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"fft2","size":"s","bytes":65536,"metric":"typed","value":10,"unit":"us","reps":5,"stat":"median","note":"jit interpreted"}
{"tool":"ddtpp","area":"ddtpp","case":"fft2","size":"s","bytes":65536,"metric":"typed-vs-manual","value":10,"unit":"us","ref":"manual","ref_value":20,"ratio":0.5,"reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"fft2","size":"s","bytes":65536,"metric":"typed-vs-contig","value":10,"unit":"us","ref":"contig","ref_value":8,"ratio":1.2,"reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"fft2","size":"s","bytes":65536,"metric":"typed-vs-mpi","value":10,"unit":"us","ref":"best MPI","ref_value":20,"ratio":0.125,"reps":5,"stat":"median"}
`

// ddtppFloor are the records of the contiguous sends of ddtppRun: the
// MPIs' of the first cell and the floor ÷ best MPI of both.
const ddtppFloor = `{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"openmpi-contig","value":0.6,"unit":"us","reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"mpich-contig","value":0.4,"unit":"us","reps":5,"stat":"median"}
{"tool":"ddtpp","area":"ddtpp","case":"milc_su3_zd","size":"s","bytes":1536,"metric":"floor-vs-mpi","value":0.4,"unit":"us","ref":"best MPI","ref_value":4,"ratio":0.1,"reps":5,"stat":"median","note":"floor: fastest of contig, mpich-contig, openmpi-contig"}
{"tool":"ddtpp","area":"ddtpp","case":"fft2","size":"s","bytes":65536,"metric":"floor-vs-mpi","value":6,"unit":"us","ref":"best MPI","ref_value":20,"ratio":0.4,"reps":5,"stat":"median","note":"floor: fastest of contig, mpich-contig, openmpi-contig"}
`

// TestDDTPP: the summaries of the typed contender are derived over the
// cells (typed ÷ contig only from 64 KiB up) and meet or miss their
// targets, the floor ÷ best MPI is derived as a geometric mean without a
// target, and the ddtpp section has a row per cell with every contender
// (the MPIs' contiguous sends after the MPIs), the three ratios and the
// floor's, then the summaries. A run without the floor renders as it did
// before the floor was measured.
func TestDDTPP(t *testing.T) {
	rs, err := parseJSON(strings.NewReader(ddtppRun))
	if err != nil {
		t.Fatal(err)
	}
	rs = aggregate(rs)
	rs = append(rs, derive(rs)...)
	by := index(rs)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for k, want := range map[string]float64{
		"ddtpp/summary/all/typed-manual-worst":      2,
		"ddtpp/summary/all/typed-manual-geomean":    1, // √(2 × 0.5)
		"ddtpp/summary/64k-up/typed-contig-geomean": 1.2,
		"ddtpp/summary/64k-up/typed-contig-worst":   1.2,
		"ddtpp/summary/all/typed-mpi-geomean":       0.25, // √(0.5 × 0.125)
		"ddtpp/summary/all/floor-mpi-geomean":       0.2,  // √(0.1 × 0.4)
	} {
		if r, ok := by[k]; !ok || !near(r.Value, want) || r.Area != "ddtpp" {
			t.Errorf("%s = %+v, want %v", k, r, want)
		}
	}
	if r := by["ddtpp/summary/all/typed-manual-worst"]; r.Note != "milc_su3_zd s" {
		t.Errorf("worst cell named %q", r.Note)
	}
	if r := by["ddtpp/summary/all/floor-mpi-geomean"]; r.Stat != "geomean" || r.Reps != 5 || r.Note != "2 cells; no typed send can go below this" {
		t.Errorf("floor summary %+v", r)
	}
	if r, ok := by["ddtpp/summary/all/floor-mpi-worst"]; ok {
		t.Errorf("floor summary with a worst cell: %+v", r)
	}
	for _, tg := range targets {
		if strings.Contains(tg.Key, "floor") {
			t.Errorf("target %q reads the floor, which is information only", tg.What)
		}
	}
	for key, want := range map[string]string{
		"ddtpp/summary/all/typed-manual-worst":      statusNotMet,
		"ddtpp/summary/64k-up/typed-contig-geomean": statusNotMet,
		"ddtpp/summary/all/typed-mpi-geomean":       statusMet,
	} {
		found := false
		for _, tg := range targets {
			if tg.Key != key {
				continue
			}
			found = true
			if _, st, err := tg.evaluate(by); err != nil || st != want {
				t.Errorf("target %q: %q, %v; want %q", tg.What, st, err, want)
			}
		}
		if !found {
			t.Errorf("no target reads %s", key)
		}
	}
	tab, err := ddtppTable(rs)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "table", tab,
		"| case | size | bytes | typed (µs) | manual (µs) | contig (µs) | mpich (µs) | openmpi (µs) | mpich-contig (µs) | openmpi-contig (µs) | typed ÷ manual | typed ÷ contig | typed ÷ best MPI | floor ÷ best MPI | reps | typed's type |\n"+
			"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
		"| milc_su3_zd | s | 1536 | 2.000 | 1.000 | 0.500 | 4.000 | 5.000 | 0.400 | 0.600 | 2.000 | 4.000 | 0.500 | 0.100 | 5 | compiled |",
		"| fft2 | s | 65536 | 10.0 | – | – | – | – | – | – | 0.500 | 1.200 | 0.125 | 0.400 | 5 | interpreted |",
		"| summary | 64k-up | typed-contig-geomean | 1.200 |",
		"| summary | all | floor-mpi-geomean | 0.200 | – | – | – | – | 5 | 2 cells; no typed send can go below this |")
	old, err := parseJSON(strings.NewReader(ddtppTyped))
	if err != nil {
		t.Fatal(err)
	}
	old = aggregate(old)
	old = append(old, derive(old)...)
	otab, err := ddtppTable(old)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "table without the floor", otab,
		"| case | size | bytes | typed (µs) | manual (µs) | contig (µs) | mpich (µs) | openmpi (µs) | typed ÷ manual | typed ÷ contig | typed ÷ best MPI | reps | typed's type |\n"+
			"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
		"| milc_su3_zd | s | 1536 | 2.000 | 1.000 | 0.500 | 4.000 | 5.000 | 2.000 | 4.000 | 0.500 | 5 | compiled |",
		"| fft2 | s | 65536 | 10.0 | – | – | – | – | 0.500 | 1.200 | 0.125 | 5 | interpreted |")
	if strings.Contains(otab, "floor") {
		t.Errorf("table without the floor shows one:\n%s", otab)
	}
	page, err := rewrite("<!-- dashboard:ddtpp begin -->\n<!-- dashboard:ddtpp end -->\n", rs)
	if err != nil || !strings.Contains(page, tab) {
		t.Errorf("ddtpp section not filled: %v\n%s", err, page)
	}
}

// osuRun is one run of test/bench/osu on 4 ranks: weft's two contenders
// with their ratios to the faster MPI, the MPIs without, and a weft cell
// on 2 ranks that no MPI ran (no ratio).
const osuRun = `{"tool":"osu","area":"collectives","case":"weft-np4-barrier","size":"0","metric":"lat","value":2,"unit":"us","ref":"best MPI","ref_value":4,"ratio":0.5,"reps":3,"stat":"median"}
{"tool":"osu","area":"collectives","case":"weft-np4-allreduce","size":"8","metric":"lat","value":4,"unit":"us","ref":"best MPI","ref_value":2,"ratio":2,"reps":3,"stat":"median"}
{"tool":"osu","area":"collectives","case":"weft-np4-allreduce","size":"1024","metric":"lat","value":4,"unit":"us","ref":"best MPI","ref_value":4,"ratio":1,"reps":3,"stat":"median"}
{"tool":"osu","area":"collectives","case":"weft-np4-allreduce","size":"65536","metric":"lat","value":30,"unit":"us","ref":"best MPI","ref_value":10,"ratio":3,"reps":3,"stat":"median"}
{"tool":"osu","area":"collectives","case":"weft-np4-allreduce","size":"1048576","metric":"lat","value":90,"unit":"us","ref":"best MPI","ref_value":100,"ratio":0.9,"reps":3,"stat":"median"}
{"tool":"osu","area":"collectives","case":"weft-np4-alltoall","size":"1048576","metric":"lat","value":110,"unit":"us","ref":"best MPI","ref_value":100,"ratio":1.1,"reps":3,"stat":"median"}
{"tool":"osu","area":"collectives","case":"weft-ep-np4-allreduce","size":"8","metric":"lat","value":0.5,"unit":"us","ref":"best MPI","ref_value":2,"ratio":0.125,"reps":3,"stat":"median"}
{"tool":"osu","area":"collectives","case":"weft-ep-np4-allreduce","size":"1048576","metric":"lat","value":50,"unit":"us","ref":"best MPI","ref_value":100,"ratio":0.5,"reps":3,"stat":"median"}
{"tool":"osu","area":"collectives","case":"mpich-np4-allreduce","size":"8","metric":"lat","value":2,"unit":"us","reps":3,"stat":"median"}
{"tool":"osu","area":"collectives","case":"openmpi-np4-allreduce","size":"8","metric":"lat","value":3,"unit":"us","reps":3,"stat":"median"}
{"tool":"osu","area":"collectives","case":"weft-np2-allreduce","size":"8","metric":"lat","value":1,"unit":"us","reps":3,"stat":"median"}
`

// TestOSU: the collectives' targets are derived from osu's cells as osu
// computes them (geometric mean over sizes ≤ 1 KiB with the barrier,
// worst cell, worst at ≥ 1 MiB, the endpoints' 8-byte Allreduce speedup),
// a contender without MPI ratios gets no summary and its targets are not
// measured, and the osu section has a row per collective and rank count.
func TestOSU(t *testing.T) {
	rs, err := parseJSON(strings.NewReader(osuRun))
	if err != nil {
		t.Fatal(err)
	}
	rs = aggregate(rs)
	d := derive(rs)
	rs = append(rs, d...)
	by := index(rs)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for k, want := range map[string]struct {
		v    float64
		note string
	}{
		"osu/weft-np4/1k-down/lat-ratio-geomean":    {1, "3 cells"}, // ∛(0.5 × 2 × 1)
		"osu/weft-np4/all/lat-ratio-worst":          {3, "allreduce 64K"},
		"osu/weft-np4/1m-up/lat-ratio-worst":        {1.1, "alltoall 1M"},
		"osu/weft-ep-np4/1k-down/lat-ratio-geomean": {0.125, "1 cells"},
		"osu/weft-ep-np4/1m-up/lat-ratio-worst":     {0.5, "allreduce 1M"},
		"osu/weft-ep-np4-allreduce/8/speedup":       {8, ""},
	} {
		if r, ok := by[k]; !ok || !near(r.Value, want.v) || r.Note != want.note || r.Area != "collectives" || r.Reps != 3 {
			t.Errorf("%s = %+v, want %v (%s)", k, r, want.v, want.note)
		}
	}
	if len(d) != 7 { // 3 per contender on 4 ranks and the speedup
		t.Errorf("%d records derived, want 7 (none for weft-np2, which has no ratio):\n%+v", len(d), d)
	}
	want := map[string]string{
		"osu/weft-np4/1k-down/lat-ratio-geomean":    statusMet,
		"osu/weft-np4/all/lat-ratio-worst":          statusNotMet,
		"osu/weft-np4/1m-up/lat-ratio-worst":        statusNotMet,
		"osu/weft-ep-np4/1m-up/lat-ratio-worst":     statusMet,
		"osu/weft-ep-np4-allreduce/8/speedup":       statusMet,
		"osu/weft-np2/1k-down/lat-ratio-geomean":    statusNoData,
		"osu/weft-ep-np2/1k-down/lat-ratio-geomean": statusNoData,
	}
	for _, tg := range targets {
		if w, ok := want[tg.Key]; ok {
			if _, st, err := tg.evaluate(by); err != nil || st != w {
				t.Errorf("target %q: %q, %v; want %q", tg.What, st, err, w)
			}
			delete(want, tg.Key)
		}
	}
	for k := range want {
		t.Errorf("no target reads %s", k)
	}
	tab, err := osuTable(rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"| collective | ranks | weft ÷ MPI, ≤ 1 KiB | weft ÷ MPI, ≥ 1 MiB | weft-ep ÷ MPI, ≤ 1 KiB | weft-ep ÷ MPI, ≥ 1 MiB | faster MPI, smallest size (µs) | faster MPI, largest size (µs) | reps |",
		"| barrier | 4 | 0.500 | – | – | – | 4.000 | – | 3 |",
		"| allreduce | 4 | 1.414 | 0.900 | 0.125 | 0.500 | 2.000 (8 B) | 100.0 (1 MiB) | 3 |", // √(2 × 1)
		"| alltoall | 4 | – | 1.100 | – | – | 100.0 (1 MiB) | – | 3 |",
		"| allreduce | 2 | – | – | – | – | – | – | 3 |",
	} {
		if !strings.Contains(tab, line) {
			t.Errorf("table lacks %q:\n%s", line, tab)
		}
	}
	page, err := rewrite("<!-- dashboard:osu begin -->\n<!-- dashboard:osu end -->\n<!-- dashboard:targets begin -->\n<!-- dashboard:targets end -->\n", rs)
	if err != nil || !strings.Contains(page, tab) {
		t.Errorf("osu section not filled: %v\n%s", err, page)
	}
	if !strings.Contains(page, "| collectives | latency ≤ 1.0× the faster MPI, geomean of sizes ≤ 1 KiB (weft, 2 processes) | `osu/weft-np2/1k-down/lat-ratio-geomean` | value | ≤ 1.000 | – | not measured |") {
		t.Errorf("a target without data is not shown as not measured:\n%s", page)
	}
}

// TestInherit: records without provenance (ddtbench, go test -bench) take
// the machine, commit and Go release most of the directory's files carry;
// a file from another run is outvoted, and a tie leaves the field empty.
func TestInherit(t *testing.T) {
	rec := func(m, c string) benchrec.Record { return benchrec.Record{Machine: m, Commit: c, Go: "go1"} }
	bare := []benchrec.Record{{}, {}}
	files := [][]benchrec.Record{
		{rec("intel", "a"), rec("intel", "a")},
		{rec("intel", "a")},
		{rec("amd", "b"), rec("", "")}, // another run
		bare,
	}
	inherit(files)
	for _, r := range bare {
		if r.Machine != "intel" || r.Commit != "a" || r.Go != "go1" {
			t.Errorf("inherited %+v, want the majority's intel, a, go1", r)
		}
	}
	if r := files[2][1]; r.Machine != "intel" {
		t.Errorf("a record of the outvoted file without machine got %q", r.Machine)
	}
	tie := []benchrec.Record{{}}
	inherit([][]benchrec.Record{{rec("intel", "a")}, {rec("amd", "b")}, tie})
	if tie[0].Machine != "" || tie[0].Commit != "" || tie[0].Go != "go1" {
		t.Errorf("a tie inherited %+v, want no machine or commit", tie[0])
	}
}

// TestMachineProbe: the machine table shows the placement probe read
// before and after each area's run when run.sh recorded it, and keeps
// its four columns when nothing was probed.
func TestMachineProbe(t *testing.T) {
	rs := []benchrec.Record{
		{Tool: "p2p", Area: "p2p", Case: "weft", Size: "8", Metric: "lat", Value: 0.2, Commit: "abc", Machine: "M", Go: "go1"},
		{Tool: "osu", Area: "collectives", Case: "weft-np2", Size: "8", Metric: "lat", Value: 1, Commit: "abc", Machine: "M", Go: "go1"},
		{Tool: "probe", Area: "p2p", Case: "p2p", Size: "before", Metric: "regime", Value: 9.04},
		{Tool: "probe", Area: "p2p", Case: "p2p", Size: "after", Metric: "regime", Value: 33.46},
		{Tool: "probe", Area: "ddtpp", Case: "ddtpp", Size: "before", Metric: "regime", Value: 9},
	}
	got, err := machineTable(aggregate(rs))
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "machine table", got,
		"| area | machine | commit | Go | placement probe before → after (µs) |",
		"| collectives | M | abc | go1 | – → – |",
		"| p2p | M | abc | go1 | 9.0 → 33.5 |")
	if strings.Contains(got, "ddtpp") {
		t.Errorf("an area with only probe records has a row:\n%s", got)
	}
	got, err = machineTable(rs[:2])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "| area | machine | commit | Go |\n|---|---|---|---|\n") || strings.Contains(got, "probe") {
		t.Errorf("without probes the table has four columns:\n%s", got)
	}
}

// wantAll reports every string of want that text (called what in the
// message) lacks.
func wantAll(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}
