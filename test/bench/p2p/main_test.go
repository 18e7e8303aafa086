package main

import (
	"bytes"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/test/bench/internal/tooltest"
)

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig("8, 4k,1m", "2ep,1,1,2epb", "native,fabric", "mpich,openmpi", 3, 100, 64, 10, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.sizes, []int{8, 4096, 1 << 20}) || !slices.Equal(cfg.rates, []string{"2ep", "1", "2epb"}) ||
		!slices.Equal(cfg.weft, []string{"native", "fabric"}) || !slices.Equal(cfg.refs, []string{"mpich", "openmpi"}) {
		t.Errorf("config %+v", cfg)
	}
	if cfg, err := parseConfig("", "1", "native", "", 1, 1, 1, 1, 0); err != nil || len(cfg.sizes) != 0 {
		t.Errorf("rates only: %+v, %v", cfg, err)
	}
	for _, bad := range []struct {
		sizes, rates, weft, refs  string
		reps, iters, window, wins int
	}{
		{"8,x", "1", "native", "", 1, 1, 1, 1},
		{"0", "1", "native", "", 1, 1, 1, 1},
		{"2g", "1", "native", "", 1, 1, 1, 1},
		{"8", "3", "native", "", 1, 1, 1, 1},
		{"8", "1", "a=b", "", 1, 1, 1, 1},
		{"8", "1", "native", "lam", 1, 1, 1, 1},
		{"8", "1", "native", "", 0, 1, 1, 1},
		{"8", "1", "native", "", 1, 0, 1, 1},
		{"8", "1", "native", "", 1, 1, 0, 1},
		{"8", "1", "native", "", 1, 1, 1, 0},
		{"", "", "native", "", 1, 1, 1, 1},
		{"8", "1", "", "", 1, 1, 1, 1},
	} {
		if _, err := parseConfig(bad.sizes, bad.rates, bad.weft, bad.refs, bad.reps, bad.iters, bad.window, bad.wins, 8); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestItersFor(t *testing.T) {
	for _, c := range []struct{ base, size, want int }{
		{20000, 8, 20000}, {20000, 4096, 20000}, {20000, 65536, 1250}, {20000, 4 << 20, 100}, {50, 4 << 20, 50}, {50, 8, 50},
	} {
		if got := itersFor(c.base, c.size); got != c.want {
			t.Errorf("itersFor(%d, %d) = %d, want %d", c.base, c.size, got, c.want)
		}
	}
}

func TestParseResults(t *testing.T) {
	out := "some launcher chatter\nRESULT lat 8 0.3224\nRESULT bw 8 24.8117\n[warn] RESULT lat 9 1\nRESULT msgrate 8 8505527.6\n"
	rs, err := parseResults([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[resultKey]float64{{"lat", 8}: 0.3224, {"bw", 8}: 24.8117, {"msgrate", 8}: 8505527.6}
	if len(rs) != len(want) {
		t.Fatalf("got %v, want %v", rs, want)
	}
	for k, v := range want {
		if rs[k] != v {
			t.Errorf("%v = %v, want %v", k, rs[k], v)
		}
	}
	for _, bad := range []string{"RESULT lat x 1\n", "RESULT lat 8 fast\n", "RESULT lat 8 0\n", "RESULT lat 8 -1\n",
		"RESULT lat 8 NaN\n", "RESULT lat 8 +Inf\n", "RESULT lat 8 1\nRESULT lat 8 2\n"} {
		if _, err := parseResults([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestAggregate: ratios are taken within each repetition against the best
// reference of that repetition, then their median; a missing figure
// leaves its repetition out; 2ep and 2epb are compared with the MPIs'
// 2-sender rate, 1b with their 1-sender rate, and bandwidth with
// fi_pingpong as well.
func TestAggregate(t *testing.T) {
	cfg := &config{sizes: []int{8, 1 << 20}, rates: []string{"1", "2ep", "1b", "2epb"}, reps: 3, msgSize: 8}
	res := newResults(3)
	nan := math.NaN()
	set := func(col, metric, label string, v ...float64) {
		for i, x := range v {
			if !math.IsNaN(x) {
				res.Add(cell{col, metric, label}, i, x)
			}
		}
	}
	// Latency: a slow regime in repetition 2 hits weft and the MPIs alike.
	set("weft", "lat", "8", 1.0, 3.0, 1.2)
	set("mpich", "lat", "8", 0.5, 1.5, 0.6)
	set("openmpi", "lat", "8", 0.4, 2.0, nan)
	set("fi_pingpong", "lat", "8", 0.1, 0.1, 0.1) // not a latency reference
	// Bandwidth: fi_pingpong is the best reference in repetition 1.
	set("weft", "bw", "1048576", 900, 1000, 1100)
	set("mpich", "bw", "1048576", 800, 1000, 1000)
	set("openmpi", "bw", "1048576", 700, 500, 1000)
	set("fi_pingpong", "bw", "1048576", 1000, 900, 1000)
	set("weft", "msgrate", "1", 2e6, 2e6, 2e6)
	set("mpich", "msgrate", "1", 4e6, 8e6, 4e6)
	set("openmpi", "msgrate", "1", 1e6, 1e6, 1e6)
	set("weft", "msgrate", "2ep", 6e6, 3e6, 9e6)
	set("weft", "msgrate", "1b", 4e6, 4e6, 8e6)
	set("weft", "msgrate", "2epb", 3e6, 2e6, 3e6)
	set("mpich", "msgrate", "2", 2e6, 2e6, 2e6)
	set("openmpi", "msgrate", "2", 3e6, 1e6, 3e6)

	if b := res.Best(cells([]string{"mpich", "openmpi"}, "lat", "8"), true); !sameFloats(b, []float64{0.4, 1.5, 0.6}) {
		t.Errorf("best latency %v", b)
	}

	rp := &report{cfg: cfg, res: res, wefts: []string{"weft"}, fi: "fi_pingpong", mpis: []string{"mpich", "openmpi"}}
	by := map[string]benchrec.Record{}
	for _, r := range rp.records() {
		by[r.Key()] = r
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// Per repetition 1/0.4, 3/1.5, 1.2/0.6 = 2.5, 2, 2: median 2. (The
	// ratio of the medians, 1.2/0.6, happens to agree; bandwidth below
	// does not.)
	if r := by["p2p/weft/8/lat"]; !near(r.Ratio, 2) || r.Ref != "best MPI" || !near(r.RefValue, 0.6) || r.Value != 1.2 || r.Reps != 3 || r.Unit != "us" {
		t.Errorf("weft lat %+v", r)
	}
	// 900/1000, 1000/1000, 1100/1000: median 1.0.
	if r := by["p2p/weft/1048576/bw"]; !near(r.Ratio, 1.0) || r.Ref != "best of MPI, fi_pingpong" || r.RefValue != 1000 {
		t.Errorf("weft bw %+v", r)
	}
	if r := by["p2p/weft-rate1/8/msgrate"]; !near(r.Ratio, 0.5) || r.RefValue != 4e6 {
		t.Errorf("weft rate 1 %+v", r)
	}
	// 6/3, 3/2, 9/3: median 2.
	if r := by["p2p/weft-rate2ep/8/msgrate"]; !near(r.Ratio, 2) || r.Ref != "best MPI 2 senders" || r.RefValue != 3e6 {
		t.Errorf("weft rate 2ep %+v", r)
	}
	// 4/4, 4/8, 8/4: median 1.
	if r := by["p2p/weft-rate1b/8/msgrate"]; !near(r.Ratio, 1) || r.Ref != "best MPI" || r.RefValue != 4e6 {
		t.Errorf("weft rate 1b %+v", r)
	}
	// 3/3, 2/2, 3/3: median 1.
	if r := by["p2p/weft-rate2epb/8/msgrate"]; !near(r.Ratio, 1) || r.Ref != "best MPI 2 senders" || r.RefValue != 3e6 {
		t.Errorf("weft rate 2epb %+v", r)
	}
	// References carry their own medians and no ratio; openmpi's latency
	// is over the 2 repetitions it has.
	if r := by["p2p/openmpi/8/lat"]; r.Ratio != 0 || r.Ref != "" || r.Reps != 2 || r.Value != 1.2 {
		t.Errorf("openmpi lat %+v", r)
	}
	if r, ok := by["p2p/fi_pingpong/8/lat"]; !ok || r.Value != 0.1 {
		t.Errorf("fi_pingpong lat %+v", r)
	}
	if _, ok := by["p2p/mpich-rate2/8/msgrate"]; ok {
		t.Error("case 2 reported though only 2ep was asked for")
	}

	var table bytes.Buffer
	rp.print(&table)
	tooltest.Contains(t, table.String(),
		"8 B half round trip ≤ 1.0× best MPI: NOT met (2.00 at 8)",
		"message rate, 2 endpoints of one process ≥ 1.5× best MPI with 2 senders: met (2.00 at 2ep)",
		"bandwidth ≥ 1.0× best of MPI and fi_pingpong at every size ≥ 64 KiB: met (1.00 at 1048576)")
}

func sameFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) && math.Abs(a[i]-b[i]) > 1e-12 {
			return false
		}
	}
	return true
}

// TestRunsSideBySide builds the tool and fabrun and runs it end to end with
// tiny sizes and iteration counts: every contender found here takes part
// in every repetition, the tables and the -json records are well formed,
// the temporary directory is removed, and bad command lines are refused
// with status 2. The figures are not checked (timings on a shared machine
// are anything).
func TestRunsSideBySide(t *testing.T) {
	tool := tooltest.New(t, "p2p", "builds and runs the benchmark tool with MPI jobs", 4*time.Minute)
	tool.Args = []string{"-iters", "200", "-windows", "20", "-timeout", "60s"}
	var want []string // the contenders that can run here
	for _, c := range []struct{ name, needs string }{{"fi_pingpong", "fi_pingpong"}, {"mpich", "mpiexec.hydra"}, {"openmpi", "mpirun.openmpi"}} {
		if _, err := exec.LookPath(c.needs); err == nil {
			want = append(want, c.name)
		}
	}

	t.Run("table", func(t *testing.T) {
		out, progress := tool.Run(t, "-reps", "2", "-sizes", "8,64k", "-rates", "1,2ep", "-weft", "native,fabric")
		for _, rep := range []string{"1", "2"} {
			for _, what := range []string{"size 8", "size 65536", "rate 1", "rate 2ep"} {
				line := regexp.MustCompile(`(?m)^rep ` + rep + ` ` + what + `:.*$`).FindString(progress)
				if line == "" {
					t.Fatalf("no progress line for rep %s %s:\n%s", rep, what, progress)
				}
				for _, n := range append([]string{"weft", "weft-fabric"}, want...) {
					runs := !strings.HasPrefix(what, "rate") || (n != "fi_pingpong" && (what != "rate 2ep" || strings.HasPrefix(n, "weft")))
					if has := strings.Contains(line, " "+n+" "); has != runs {
						t.Errorf("rep %s %s: %s present %v, want %v: %q", rep, what, n, has, runs, line)
					}
				}
			}
		}
		row := regexp.MustCompile(`(?m)^ +(8|65536|1|2|2ep)((?: +(?:[0-9.]+M?|–))+) *$`)
		rows := row.FindAllStringSubmatch(out, -1)
		if len(rows) != 6 { // lat and bw for 2 sizes, 2 rate cases
			t.Fatalf("want 6 table rows, got %d:\n%s", len(rows), out)
		}
		for _, r := range rows {
			// the last two fields are the weft columns' ratios
			f := strings.Fields(r[2])
			for _, q := range f[len(f)-2:] {
				if !regexp.MustCompile(`^\d+\.\d\d$`).MatchString(q) {
					t.Errorf("row %q: ratio %q", r[0], q)
				}
			}
		}
		if !strings.Contains(out, "targets (issue 19), weft:") {
			t.Errorf("no targets:\n%s", out)
		}
	})

	t.Run("json", func(t *testing.T) {
		out, _ := tool.Run(t, "-reps", "1", "-sizes", "8", "-rates", "2,2ep,1b", "-json")
		cases := map[string]bool{}
		for _, r := range tooltest.Records(t, out) {
			// fi_pingpong prints MB/s with two decimals: an 8-byte
			// bandwidth on a loaded machine can print as 0.00.
			zeroOK := r.Case == "fi_pingpong" && r.Metric == "bw"
			if r.Tool != "p2p" || r.Area != "p2p" || r.Reps != 1 || r.Stat != "median" || r.Value < 0 || r.Value == 0 && !zeroOK || r.Unit == "" || r.Machine == "" {
				t.Errorf("record %+v: fields missing or wrong", r)
			}
			if strings.HasPrefix(r.Case, "weft") && (r.Ref == "" || r.Ratio <= 0) {
				t.Errorf("record %+v: weft without reference or ratio", r)
			}
			cases[r.Key()] = true
		}
		for _, k := range []string{"p2p/weft/8/lat", "p2p/weft/8/bw", "p2p/weft-rate2/8/msgrate", "p2p/weft-rate2ep/8/msgrate", "p2p/weft-rate1b/8/msgrate", "p2p/mpich/8/lat"} {
			if !cases[k] {
				t.Errorf("no record %s in\n%s", k, out)
			}
		}
	})

	t.Run("bad command lines", func(t *testing.T) {
		tool.RefusesUsage(t, [][]string{{"-sizes", "8,x"}, {"-rates", "3"}, {"-reps", "0"}, {"-ref", "lam"}, {"-timeout", "0s"},
			{"stray"}, {"-role", "pingpong", "x"}, {"-role", "pingpong", "0", "1", "8"}, {"-role", "msgrate", "64"},
			{"-role", "msgrate", "64", "10", "1", "8", "1", "2"}, {"-role", "dance"}})
	})
}
