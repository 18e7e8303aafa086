package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/test/bench/internal/tooltest"
)

// TestRunsSideBySide builds the tool and fabrun and runs it end to end
// with tiny iteration counts: weft and UCX (where libucx-dev and cc are
// installed; else UCX is left out with a note) take part in every
// repetition, the table and the -json
// records are well formed, and bad command lines are refused with status
// 2. The figures are not checked (timings on a shared machine are
// anything).
func TestRunsSideBySide(t *testing.T) {
	tool := tooltest.New(t, "am", "builds and runs the benchmark tool", 3*time.Minute)
	tool.Args = []string{"-iters", "400", "-timeout", "60s"}
	_, nocc := exec.LookPath("cc")
	if _, err := os.Stat("/usr/include/ucp/api/ucp.h"); err != nil {
		nocc = err // no UCX to build against
	}
	t.Run("table", func(t *testing.T) {
		out, progress := tool.Run(t, "-reps", "2", "-sizes", "4k,64k")
		for _, rep := range []string{"1", "2"} {
			if !regexp.MustCompile(`(?m)^rep ` + rep + ` weft: lat 8 [0-9.]+ p2p 8 [0-9.]+ rate 8 [0-9.]+ ratebatch 8 [0-9.]+ bw 4096 [0-9.]+ bw 65536 [0-9.]+$`).MatchString(progress) {
				t.Errorf("no weft progress line of rep %s:\n%s", rep, progress)
			}
			if nocc == nil && !regexp.MustCompile(`(?m)^rep `+rep+` ucx: lat 8 [0-9.]+ rate 8 [0-9.]+ bw 4096 [0-9.]+ bw 65536 [0-9.]+$`).MatchString(progress) {
				t.Errorf("no UCX progress line of rep %s:\n%s", rep, progress)
			}
		}
		if nocc != nil && !strings.Contains(progress, "UCX left out") {
			t.Errorf("UCX neither measured nor left out with a note:\n%s", progress)
		}
		rows := regexp.MustCompile(`(?m)^(round trip|rate|  weft batched|bw) .*$`).FindAllString(out, -1)
		if len(rows) != 5 {
			t.Fatalf("want 5 table rows, got %d:\n%s", len(rows), out)
		}
		if nocc == nil {
			for _, r := range rows {
				if !regexp.MustCompile(`\d+\.\d\d$`).MatchString(r) {
					t.Errorf("row %q: no ratio", r)
				}
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		out, _ := tool.Run(t, "-reps", "1", "-sizes", "4k", "-no-ucx", "-json")
		keys := map[string]bool{}
		for _, r := range tooltest.Records(t, out) {
			if r.Tool != "am" || r.Area != "p2p" || !(r.Value > 0) || r.Reps != 1 {
				t.Errorf("record %+v: fields missing or wrong", r)
			}
			keys[r.Key()] = true
		}
		for _, k := range []string{"am/weft/8/lat", "am/weft-p2p/8/lat", "am/weft/8/rate", "am/weft/8/ratebatch", "am/weft/4096/bw"} {
			if !keys[k] {
				t.Errorf("no record %s in\n%s", k, out)
			}
		}
	})
	t.Run("bad command lines", func(t *testing.T) {
		tool.RefusesUsage(t, [][]string{{"-window", "0"}, {"-reps", "0"}, {"-sizes", "x"},
			{"stray"}, {"-role", "rank", "x"}, {"-role", "rank", "1", "0", "0"}, {"-role", "dance"}})
	})
}
