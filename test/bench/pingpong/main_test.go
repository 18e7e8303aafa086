package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/internal/testenv"
)

// buildTool builds this command into a temporary directory.
func buildTool(t *testing.T, ctx context.Context) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pingpong")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// runTool runs the tool with a short configuration and returns its stdout
// and stderr.
func runTool(t *testing.T, ctx context.Context, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-provider", "shm", "-reps", "2", "-iters", "200"}, args...)...)
	cmd.Env = append(os.Environ(), "WEFT_PROVIDER=", "WEFT_PINGPONG_JSON=")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\n%s\n%s", args, err, o.String(), e.String())
	}
	return o.String(), e.String()
}

// TestRunsSideBySide builds the tool and runs short repetitions on shm. It
// checks what the tool does, not the figures (timings on a shared machine
// are anything): fi_pingpong and each weft path run in every repetition,
// the tables have a well-formed row per size, -json writes one
// well-formed object per path, size and metric, and bad flags are refused.
func TestRunsSideBySide(t *testing.T) {
	testenv.Short(t, "builds and runs the benchmark tool")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildTool(t, ctx)
	_, fiErr := exec.LookPath("fi_pingpong")
	haveFI := fiErr == nil

	t.Run("text", func(t *testing.T) {
		out, progress := runTool(t, ctx, bin, "-sizes", "8,4k", "-path", "both")
		// Side by side: every repetition of every size names each program.
		for _, rep := range []string{"1", "2"} {
			for _, size := range []string{"8", "4096"} {
				line := regexp.MustCompile(`(?m)^rep ` + rep + ` size ` + size + `: fi .*$`).FindString(progress)
				if line == "" {
					t.Fatalf("no progress line for rep %s size %s:\n%s", rep, size, progress)
				}
				if !strings.Contains(line, "weft plain") || !strings.Contains(line, "weft batch") {
					t.Errorf("rep %s size %s did not run both weft paths: %q", rep, size, line)
				}
			}
		}
		if !strings.Contains(out, "weft op msg, batch order send,") {
			t.Errorf("header does not name the op and order:\n%s", out)
		}
		// One row per size under each path's header, seven numbers.
		num := `(\S+)`
		row := regexp.MustCompile(`(?m)^\s+(8|4096)` + strings.Repeat(`\s+`+num, 6) + `\s*$`)
		rows := row.FindAllStringSubmatch(out, -1)
		if len(rows) < 4 {
			t.Fatalf("want a row per size for each of 2 paths, got %d:\n%s", len(rows), out)
		}
		for _, r := range rows {
			for _, f := range r[2:] {
				if _, err := strconv.ParseFloat(f, 64); err != nil {
					t.Errorf("row %q: field %q is not a number", r[0], f)
				}
			}
		}
		if haveFI && !strings.Contains(out, "paired per repetition") {
			t.Errorf("fi_pingpong present but no paired table:\n%s", out)
		}
	})

	t.Run("json", func(t *testing.T) {
		out, _ := runTool(t, ctx, bin, "-sizes", "8", "-op", "writedata", "-order", "recv", "-json")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("want 2 lines (lat and bw at 8 B), got %d:\n%s", len(lines), out)
		}
		metrics := map[string]bool{}
		for _, l := range lines {
			var r benchrec.Record
			dec := json.NewDecoder(strings.NewReader(l))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			if r.Tool != "pingpong" || r.Area != "fabric" || r.Case != "batch-writedata-recv" || r.Size != "8" || r.Unit == "" || r.Reps != 2 || r.Stat != "median" || r.Machine == "" || r.Go == "" {
				t.Errorf("line %q: fields missing or wrong", l)
			}
			if haveFI && r.Ref != "fi_pingpong" {
				t.Errorf("line %q: fi_pingpong present but no reference", l)
			}
			metrics[r.Metric] = true
		}
		if !metrics["lat"] || !metrics["bw"] {
			t.Errorf("metrics %v: want lat and bw", metrics)
		}
	})

	t.Run("bad flags", func(t *testing.T) {
		for _, bad := range [][]string{{"-order", "sideways"}, {"-op", "atomic"}, {"-op", "writedata", "-path", "plain"},
			{"-path", "sideways"}, {"-sizes", "8,x"}, {"-sizes", "0"}, {"-reps", "0"}, {"-iters", "-3"}, {"stray"}} {
			out, err := exec.CommandContext(ctx, bin, bad...).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Errorf("%v: want exit status 2, got %v:\n%s", bad, err, out)
				continue
			}
			if !strings.HasPrefix(string(out), "pingpong: ") {
				t.Errorf("%v: no error message: %q", bad, out)
			}
		}
	})
}
