package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/test/bench/internal/tooltest"
)

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig(4, "256, 64,64", "openmpi,mpich,openmpi", 3, 1000, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.sizes) != 2 || cfg.sizes[0] != 64 || cfg.sizes[1] != 256 {
		t.Errorf("sizes %v, want [64 256]", cfg.sizes)
	}
	if strings.Join(cfg.refs, ",") != "openmpi,mpich" {
		t.Errorf("refs %v", cfg.refs)
	}
	// 4 edges of N float64: 2 KiB at N = 64 (all -iters), 8 KiB at 256 (half)
	if got := cfg.spec(); got != "64:1000,256:500" {
		t.Errorf("spec %q, want 64:1000,256:500", got)
	}
	for _, bad := range []struct {
		np                 int
		sizes, refs        string
		reps, iters, minIt int
	}{
		{0, "64", "", 1, 10, 1},
		{4, "", "", 1, 10, 1},
		{4, "x", "", 1, 10, 1},
		{4, "0", "", 1, 10, 1},
		{4, "64", "lam", 1, 10, 1},
		{4, "64", "", 0, 10, 1},
		{4, "64", "", 1, 0, 1},
	} {
		if _, err := parseConfig(bad.np, bad.sizes, bad.refs, bad.reps, bad.iters, bad.minIt); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestParseOutput(t *testing.T) {
	out := []byte("RESULT neighbor 64 1.5e-06\nRESULT p2p 64 1e-06\nnoise\nCHECK ok\n")
	got, err := parseOutput(out, []int{64})
	if err != nil || got[[2]string{"neighbor", "64"}] != 1.5 || got[[2]string{"p2p", "64"}] != 1 {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{
		"RESULT neighbor 64 1e-6\n",            // no check
		"RESULT neighbor 64 -1\nCHECK ok\n",    // a negative time
		"RESULT neighbor 128 1e-6\nCHECK ok\n", // the size asked for missing
	} {
		if _, err := parseOutput([]byte(bad), []int{64}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestRunsSideBySide runs the tool on 2 ranks with MPICH (and Open MPI
// where installed): every contender's figure in every row, the records
// of -json, and bad command lines refused.
func TestRunsSideBySide(t *testing.T) {
	tool := tooltest.New(t, "halo", "builds and runs the benchmark tool with MPI jobs", 3*time.Minute)
	tool.Args = []string{"-np", "2", "-iters", "200", "-miniters", "20", "-timeout", "60s"}
	jobs := []string{"weft", "mpich"}
	if _, err := exec.LookPath("mpirun.openmpi"); err == nil {
		jobs = append(jobs, "openmpi")
	}
	t.Run("table", func(t *testing.T) {
		out, progress := tool.Run(t, "-reps", "2", "-sizes", "16,64")
		for _, rep := range []string{"1", "2"} {
			for _, j := range jobs {
				if !regexp.MustCompile(`(?m)^rep ` + rep + ` ` + j + `: `).MatchString(progress) {
					t.Errorf("no progress line for rep %s %s:\n%s", rep, j, progress)
				}
			}
		}
		rows := regexp.MustCompile(`(?m)^ +(16|64) +\d+((?: +[0-9.]+)+)$`).FindAllStringSubmatch(out, -1)
		if len(rows) != 2 {
			t.Fatalf("%d table rows, want 2:\n%s", len(rows), out)
		}
		for _, r := range rows {
			// neighbor, p2p, each MPI, the ratio
			if want := 2 + len(jobs) - 1 + 1; len(strings.Fields(r[2])) != want {
				t.Errorf("row %q: %d figures, want %d", r[0], len(strings.Fields(r[2])), want)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		out, _ := tool.Run(t, "-reps", "1", "-sizes", "32", "-json")
		keys := map[string]bool{}
		for _, r := range tooltest.Records(t, out) {
			if r.Tool != "halo" || r.Area != "collectives" || r.Case != "halo2d-np2" || r.Value <= 0 || r.Unit != "us" || r.Bytes != 32*32 {
				t.Errorf("record %+v: fields missing or wrong", r)
			}
			keys[r.Key()] = true
		}
		for _, k := range []string{"halo/halo2d-np2/32/neighbor", "halo/halo2d-np2/32/p2p", "halo/halo2d-np2/32/mpich", "halo/halo2d-np2/32/neighbor-vs-mpi"} {
			if !keys[k] {
				t.Errorf("no record %s in\n%s", k, out)
			}
		}
	})
	t.Run("bad command lines", func(t *testing.T) {
		tool.RefusesUsage(t, [][]string{{"-sizes", "x"}, {"-np", "0"}, {"-reps", "0"}, {"-ref", "lam"}, {"-timeout", "0s"},
			{"extra"}, {"-role", "nobody"}, {"-role", "weft"}, {"-role", "weft", "64"}})
	})
}
