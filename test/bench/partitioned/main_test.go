package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/test/bench/internal/tooltest"
)

// TestRunsSideBySide builds the tool and fabrun and runs it end to end
// with tiny sizes and iteration counts: weft and MPICH (where installed)
// take part in every repetition, Open MPI 4.1, which has no partitioned
// communication, is left out with a note, the table and the -json records
// are well formed, and bad command lines are refused with status 2. The
// figures are not checked (timings on a shared machine are anything).
func TestRunsSideBySide(t *testing.T) {
	tool := tooltest.New(t, "partitioned", "builds and runs the benchmark tool with MPI jobs", 3*time.Minute)
	tool.Args = []string{"-iters", "50", "-timeout", "60s"}
	_, hydra := exec.LookPath("mpiexec.hydra")
	t.Run("table", func(t *testing.T) {
		out, progress := tool.Run(t, "-reps", "2", "-sizes", "4k,64k", "-parts", "1,8")
		for _, rep := range []string{"1", "2"} {
			for _, parts := range []string{"1", "8"} {
				for _, name := range []string{"weft", "mpich"} {
					if name == "mpich" && hydra != nil {
						continue
					}
					if !regexp.MustCompile(`(?m)^rep ` + rep + ` ` + name + ` ` + parts + ` partitions: 4096 B part [0-9.]+ us range [0-9.]+ us( whole [0-9.]+ us)? 65536 B `).MatchString(progress) {
						t.Errorf("no progress line of rep %s, %s, %s partitions:\n%s", rep, name, parts, progress)
					}
				}
			}
		}
		rows := regexp.MustCompile(`(?m)^(4096|65536) +(1|8) .*$`).FindAllString(out, -1)
		if len(rows) != 4 {
			t.Fatalf("want 4 table rows, got %d:\n%s", len(rows), out)
		}
		if hydra == nil {
			for _, r := range rows {
				if f := strings.Fields(r); !regexp.MustCompile(`^\d+\.\d\d$`).MatchString(f[len(f)-1]) {
					t.Errorf("row %q: no ratio", r)
				}
			}
		}
		if _, err := exec.LookPath("mpirun.openmpi"); err == nil && !strings.Contains(progress+out, "openmpi") {
			t.Errorf("Open MPI neither measured nor left out with a note:\n%s%s", progress, out)
		}
	})
	t.Run("json", func(t *testing.T) {
		out, _ := tool.Run(t, "-reps", "1", "-sizes", "4k", "-parts", "4", "-ref", "mpich", "-json")
		keys := map[string]bool{}
		for _, r := range tooltest.Records(t, out) {
			if r.Tool != "partitioned" || r.Area != "p2p" || r.Metric != "round" || r.Unit != "us" || !(r.Value > 0) || r.Reps != 1 {
				t.Errorf("record %+v: fields missing or wrong", r)
			}
			keys[r.Key()] = true
		}
		want := []string{"partitioned/weft-part-4/4096/round", "partitioned/weft-whole/4096/round"}
		if hydra == nil {
			want = append(want, "partitioned/mpich-part-4/4096/round")
		}
		for _, k := range want {
			if !keys[k] {
				t.Errorf("no record %s in\n%s", k, out)
			}
		}
	})
	t.Run("bad command lines", func(t *testing.T) {
		tool.RefusesUsage(t, [][]string{{"-sizes", "4k", "-parts", "3"}, {"-parts", "0"}, {"-reps", "0"}, {"-ref", "lam"},
			{"stray"}, {"-role", "rank", "x"}, {"-role", "rank", "1", "0", "0", "8"}, {"-role", "dance"}})
	})
}
