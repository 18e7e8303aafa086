package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/test/bench/internal/tooltest"
)

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig("allreduce, barrier,allreduce", "8,1k, 2m", "4,2", "ep", "openmpi", 2, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.colls, []string{"allreduce", "barrier"}) || !slices.Equal(cfg.sizes, []int{8, 1024, 2 << 20}) ||
		!slices.Equal(cfg.nps, []int{4, 2}) || !slices.Equal(cfg.weft, []string{"ep"}) || !slices.Equal(cfg.refs, []string{"openmpi"}) {
		t.Errorf("config %+v", cfg)
	}
	if cfg, err := parseConfig("iallreduce", "8", "4,2", "hybrid", "", 1, 1); err != nil || !slices.Equal(cfg.weft, []string{"hybrid"}) {
		t.Errorf("hybrid: %+v %v", cfg, err)
	}
	if _, err := parseConfig("iallreduce", "8", "3", "hybrid", "", 1, 1); err == nil {
		t.Error("hybrid with an odd rank count accepted")
	}
	if cfg, err := parseConfig("bcast", "8", "4", "procs,flat", "", 1, 1); err != nil || !slices.Equal(cfg.weft, []string{"procs", "flat"}) {
		t.Errorf("-weft procs,flat: %+v, %v", cfg, err)
	}
	if cfg, err := parseConfig("ibarrier,bcast:last,ireduce:last", "8", "2", "ep", "", 1, 1); err != nil || !slices.Equal(cfg.colls, []string{"ibarrier", "bcast:last", "ireduce:last"}) {
		t.Errorf("nonblocking and rooted at the last rank: %+v, %v", cfg, err)
	}
	for _, bad := range [][5]string{
		{"scan", "8", "2", "ep", ""}, {"bcast", "0", "2", "ep", ""}, {"bcast", "65m", "2", "ep", ""}, {"bcast", "8", "1", "ep", ""},
		{"bcast", "8", "2", "threads", ""}, {"bcast", "8", "2", "", "lam"}, {"", "8", "2", "ep", ""}, {"bcast", "", "2", "ep", ""},
		{"bcast", "8", "", "ep", ""}, {"bcast", "8", "2", "", ""}, {"allgather:last", "8", "2", "ep", ""}, {"bcast:first", "8", "2", "ep", ""},
	} {
		if _, err := parseConfig(bad[0], bad[1], bad[2], bad[3], bad[4], 1, 1); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := parseConfig("bcast", "8", "2", "ep", "", 0, 1); err == nil {
		t.Error("-reps 0 accepted")
	}
}

func TestParseResults(t *testing.T) {
	rs, err := parseResults([]byte("chatter\nRESULT allreduce 8 1.5\nRESULT barrier 0 0.25\n"))
	if err != nil || len(rs) != 2 || rs[result{"allreduce", 8}] != 1.5 || rs[result{"barrier", 0}] != 0.25 {
		t.Fatalf("%v, %v", rs, err)
	}
	for _, bad := range []string{"RESULT scan 8 1\n", "RESULT bcast x 1\n", "RESULT bcast 8 0\n", "RESULT bcast 8 NaN\n",
		"RESULT bcast 8 +Inf\n", "RESULT bcast 8\n", "RESULT bcast 8 1\nRESULT bcast 8 2\n"} {
		if _, err := parseResults([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestRunsSideBySide builds the tool and runs it once, briefly, with
// -json: every collective at one size on 2 ranks, weft's two layouts and
// the MPIs installed here; the OSU-format blocks, the side-by-side table
// and the targets (on stderr) and the records (on stdout) must be there, and bad command lines
// are refused with status 2. The figures are not checked (timings on a
// shared machine are anything).
func TestRunsSideBySide(t *testing.T) {
	tool := tooltest.New(t, "osu", "builds and runs the collective benchmark tool with MPI jobs", 2*time.Minute)
	tool.Args = []string{"-iters", "20", "-np", "2", "-sizes", "8", "-timeout", "60s"}
	mpis := []string{}
	for _, m := range []struct{ name, needs string }{{"MPICH", "mpiexec.hydra"}, {"Open MPI", "mpirun.openmpi"}} {
		if _, err := exec.LookPath(m.needs); err == nil {
			mpis = append(mpis, m.name)
		}
	}
	// One run: with -json the tables go to stderr with the progress.
	jout, out := tool.Run(t, "-reps", "1", "-json")
	if !strings.Contains(out, "rep 1 np 2:") {
		t.Errorf("no progress line:\n%s", out)
	}
	for _, who := range append([]string{"weft, 2 processes", "weft, 2 endpoint handles of one process"}, mpis...) {
		for _, k := range []string{"Bcast", "Reduce", "Allreduce", "Allgather", "Alltoall"} {
			block := regexp.MustCompile(`# OSU MPI ` + k + ` Latency Test \(` + regexp.QuoteMeta(who) + `[^)]*\)\n# Size       Avg Latency\(us\)\n8 +\d+\.\d\d\n`)
			if !block.MatchString(out) {
				t.Errorf("no %s block of %s:\n%s", k, who, out)
			}
		}
		if !regexp.MustCompile(`# OSU MPI Barrier Latency Test \(` + regexp.QuoteMeta(who) + `[^)]*\)\n# Avg Latency\(us\)\n +\d+\.\d\d\n`).MatchString(out) {
			t.Errorf("no Barrier block of %s:\n%s", who, out)
		}
	}
	if len(mpis) > 0 {
		tooltest.Contains(t, out, "targets (latency ÷ the faster MPI):", "weft 2 ranks: geomean ≤ 1 KiB", "weft-ep 2 ranks: geomean ≤ 1 KiB")
		row := regexp.MustCompile(`(?m)^allreduce 8 +(?:[0-9.]+ +){2,4}\d+\.\d\d +\d+\.\d\d$`)
		if !row.MatchString(out) {
			t.Errorf("no allreduce row with two ratios:\n%s", out)
		}
	}

	seen := map[string]bool{}
	for _, r := range tooltest.Records(t, jout) {
		if r.Tool != "osu" || r.Area != "collectives" || r.Metric != "lat" || r.Unit != "us" || r.Value <= 0 || r.Reps != 1 {
			t.Errorf("record %+v", r)
		}
		if strings.HasPrefix(r.Case, "weft") && len(mpis) > 0 && (r.Ref != "best MPI" || r.Ratio <= 0) {
			t.Errorf("record %+v: weft without reference", r)
		}
		seen[r.Case] = true
	}
	for _, c := range []string{"weft-np2-allreduce", "weft-ep-np2-allreduce"} {
		if !seen[c] {
			t.Errorf("no record %s:\n%s", c, jout)
		}
	}

	tool.RefusesUsage(t, [][]string{{"-colls", "scan"}, {"-np", "1"}, {"-sizes", "0"}, {"-reps", "0"}, {"-ref", "lam"},
		{"stray"}, {"-role", "dance"}, {"-role", "rank", "1"}, {"-role", "rank", "0", "10", "bcast", "8"}, {"-role", "rank", "1", "10", "scan", "8"},
		{"-tune", "x", "-tune-iters", "0"}, {"-role", "tune", "1", "3"}, {"-role", "tune", "0", "3", "8"}})

	tuneRun(t, tool)
}

// tuneRun: the tuning run (-tune) on 2 processes, two sizes, writes a
// table that the loader reads, with a rule per tuned collective whose
// choice at each size is the one the report prints; the progress lines
// come through go-hclog on stderr.
func tuneRun(t *testing.T, tool *tooltest.Tool) {
	path := filepath.Join(t.TempDir(), "coll.table")
	out, errOut := tool.Run(t, "-tune", path, "-np", "2", "-sizes", "8,64k", "-tune-iters", "3")
	tooltest.Contains(t, errOut, "[INFO]  osu-tune: tuning: ranks=2", "weft.collectives: tune: collective=alltoall")
	tab, err := C.LoadTable(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^  (\w+) +2 +(\d+)  (\w+) +(\w+) +[* ]  \w+ [\d.]+`).FindAllStringSubmatch(out, -1)
	if len(rows) != 16 {
		t.Fatalf("%d report rows, want 8 collectives × 2 sizes:\n%s", len(rows), out)
	}
	for _, r := range rows {
		k, size, tuned := r[1], r[2], r[3]
		var coll C.Collective
		for c := C.CollBarrier; c <= C.CollScan; c++ {
			if c.String() == k {
				coll = c
			}
		}
		n, _ := strconv.Atoi(size)
		if k == "allgather" || k == "allgatherv" {
			n *= 2
		}
		got := C.Auto
		for _, s := range tab.Rule(coll, 2) {
			if n >= s.From {
				got = s.Algorithm
			}
		}
		if got.String() != tuned {
			t.Errorf("%s %s B: the table picks %s, the report says %s", k, size, got, tuned)
		}
	}
}
