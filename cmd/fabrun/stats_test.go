package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/am"
	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/onesided"
)

// statsRank is a rank of TestStats: rank i sends rank j (j+1)·10
// messages of (i+1)·100 bytes, receives as many from every other rank,
// runs three Allreduces and one 64-byte Put (and with
// WEFT_FABRUN_TEST_AM sends two active messages), and closes its world (which writes its traffic
// and its collectives' counts where WEFT_STATS says).
func statsRank() int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := func() error {
		w, err := endpoint.Init(ctx)
		if err != nil {
			return err
		}
		defer w.Close()
		c := w.Comm()
		me, p := c.Rank(), c.Size()
		var reqs []*endpoint.Request
		for j := range p {
			if j == me {
				continue
			}
			for range (me + 1) * 10 { // from j: j's size, my count
				r, err := c.Irecv(make([]byte, (j+1)*100), j, 7)
				if err != nil {
					return err
				}
				reqs = append(reqs, r)
			}
			for range (j + 1) * 10 {
				r, err := c.Isend(make([]byte, (me+1)*100), j, 7)
				if err != nil {
					return err
				}
				reqs = append(reqs, r)
			}
		}
		if err := endpoint.WaitAll(ctx, reqs...); err != nil {
			return err
		}
		// three Allreduces (through the node level: no messages)
		cl, err := collectives.New(ctx, c)
		if err != nil {
			return err
		}
		for range 3 {
			if err := collectives.Allreduce(ctx, cl, nil, make([]float64, 2), collectives.Sum[float64]()); err != nil {
				return err
			}
		}
		if err := cl.Free(); err != nil {
			return err
		}
		// with WEFT_FABRUN_TEST_AM: two active messages of 10 bytes to
		// handler 5 of the right neighbour (their messages add to the
		// point-to-point traffic)
		e, err := am.Open(ctx, c)
		if err != nil {
			return err
		}
		sends := 0
		if os.Getenv("WEFT_FABRUN_TEST_AM") != "" {
			sends = 2
		}
		if err := e.Register(5, func(context.Context, *am.Msg) error { return nil }); err != nil {
			return err
		}
		for range sends {
			if err := e.Send(ctx, (me+1)%p, 5, nil, make([]byte, 10)); err != nil {
				return err
			}
		}
		if err := e.Quiesce(ctx); err != nil {
			return err
		}
		if err := e.Close(ctx); err != nil {
			return err
		}
		// a Put of 64 bytes into the right neighbour's window
		win, err := onesided.Allocate(ctx, c, 128)
		if err != nil {
			return err
		}
		if err := win.Put((me+1)%p, 0, make([]byte, 64)); err != nil {
			return err
		}
		if err := win.Free(ctx); err != nil {
			return err
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		return w.Close()
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rank:", err)
		return 1
	}
	return 0
}

// TestStats: fabrun --stats reports what the ranks of a weft job sent
// each other (counted by endpoint, written at World.Close): per rank the
// messages and bytes sent and received, per transport, the matrix of
// bytes, and the collectives' calls; fabrun stats DIR reports a directory the ranks wrote into
// (WEFT_STATS), with --csv its lines; a directory without files, or with
// a broken one, is an error.
func TestStats(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const p = 3
	// rank i sends j (j+1)·10 messages of (i+1)·100 bytes
	want := func(i, j int) (msgs, bytes int) { return (j + 1) * 10, (j + 1) * 10 * (i + 1) * 100 }
	check := func(out string) {
		t.Helper()
		for r := range p {
			var sm, sb, rm, rb int
			for j := range p {
				if j == r {
					continue
				}
				m, b := want(r, j)
				sm, sb = sm+m, sb+b
				m, b = want(j, r)
				rm, rb = rm+m, rb+b
			}
			line := regexp.MustCompile(fmt.Sprintf(`(?m)^\s*%d\s+\S+\s+%d\s+(\S+ \S+)\s+%d\s+(\S+ \S+)\s+%d\s+0\s*$`, r, sm, rm, sm))
			m := line.FindStringSubmatch(out)
			if m == nil {
				t.Errorf("no line for rank %d (%d messages sent, %d received, all through the node transport) in:\n%s", r, sm, rm, out)
				continue
			}
			if m[1] != human(uint64(sb)) || m[2] != human(uint64(rb)) {
				t.Errorf("rank %d: sent %s, received %s; want %s and %s", r, m[1], m[2], human(uint64(sb)), human(uint64(rb)))
			}
		}
		if !strings.Contains(out, "bytes sent (row: from, column: to)") {
			t.Errorf("no matrix in:\n%s", out)
		}
		// (the active-message engine's Quiesce starts Iallreduces)
		if !regexp.MustCompile(`(?m)^\s*Allreduce\s+9\s+\S+\s+\S+ \(\d\)\s+\S+\s+\d+\s+\S+\s*$`).MatchString(out) {
			t.Errorf("no line for 9 blocking Allreduce calls (3 ranks, 3 each) in:\n%s", out)
		}
		for r := range p {
			if !regexp.MustCompile(fmt.Sprintf(`(?m)^\s*%d\s+1, 64 B\s+0, 0 B\s+0, 0 B\s+0, 0 B\s*$`, r)).MatchString(out) {
				t.Errorf("no one-sided line for rank %d (one Put of 64 bytes) in:\n%s", r, out)
			}
		}
		// the one-sided matrix: 64 B from each rank to its right neighbour
		_, after, ok := strings.Cut(out, "one-sided bytes (row: origin, column: target):\n")
		rows := strings.Split(after, "\n")
		if !ok || len(rows) < p+1 {
			t.Fatalf("no one-sided matrix in:\n%s", out)
		}
		for r := range p {
			cells := strings.Fields(strings.ReplaceAll(rows[1+r], " B", "B"))
			want := []string{strconv.Itoa(r), "0B", "0B", "0B"}
			want[1+(r+1)%p] = "64B"
			if !slices.Equal(cells, want) {
				t.Errorf("one-sided matrix row %d: %q, want %q", r, cells, want)
			}
		}
	}
	r := runFabrun(t, []string{"WEFT_FABRUN_TEST_RANK=stats"}, "", "-n", strconv.Itoa(p), "--stats", "--timeout", "60s", self)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	check(r.Stderr)
	r = runFabrun(t, []string{"WEFT_FABRUN_TEST_RANK=stats", "WEFT_FABRUN_TEST_AM=1"}, "", "-n", strconv.Itoa(p), "--stats", "--timeout", "60s", self)
	if r.Code != 0 || !regexp.MustCompile(`(?m)^\s*5\s+6\s+6\s+60 B\s*$`).MatchString(r.Stderr) {
		t.Errorf("no line for handler 5 (6 active messages of 10 bytes sent and handled): exit %d\n%s", r.Code, r.Stderr)
	}

	dir := t.TempDir()
	r = runFabrun(t, []string{"WEFT_FABRUN_TEST_RANK=stats", "WEFT_STATS=" + dir}, "", "-n", strconv.Itoa(p), "--timeout", "60s", self)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	csvPath := filepath.Join(t.TempDir(), "traffic.csv")
	r = runFabrun(t, nil, "", "stats", "--csv", csvPath, dir)
	if r.Code != 0 {
		t.Fatalf("fabrun stats: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	check(r.Stdout)
	raw, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 1+p*(p-1)+p || lines[0] != "from,to,transport,messages,bytes" {
		t.Fatalf("csv:\n%s", raw)
	}
	for i := range p {
		if row := fmt.Sprintf("%d,%d,onesided,1,64", i, (i+1)%p); !strings.Contains(string(raw), row+"\n") {
			t.Errorf("csv lacks %q:\n%s", row, raw)
		}
	}
	for i := range p {
		for j := range p {
			if i == j {
				continue
			}
			m, b := want(i, j)
			if row := fmt.Sprintf("%d,%d,node,%d,%d", i, j, m, b); !strings.Contains(string(raw), row+"\n") {
				t.Errorf("csv lacks %q:\n%s", row, raw)
			}
		}
	}

	// A CSV file that cannot be written is an error, not a silent success.
	bad := filepath.Join(t.TempDir(), "missing", "traffic.csv")
	if r = runFabrun(t, nil, "", "stats", "--csv", bad, dir); r.Code != 1 || !strings.Contains(r.Stderr, "traffic.csv") {
		t.Errorf("unwritable --csv: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// A rank that wrote nothing (it never closed its world) is named.
	if err := os.Remove(filepath.Join(dir, "weft-stats.2.json")); err != nil {
		t.Fatal(err)
	}
	if r = runFabrun(t, nil, "", "stats", dir); r.Code != 0 || !strings.Contains(r.Stdout, "no statistics from ranks [2]") {
		t.Errorf("a rank's file missing: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// Errors: no files; a broken file.
	empty := t.TempDir()
	if r = runFabrun(t, nil, "", "stats", empty); r.Code != 1 || !strings.Contains(r.Stderr, "no weft-stats") {
		t.Errorf("empty directory: exit %d\n%s", r.Code, r.Stderr)
	}
	if err := os.WriteFile(filepath.Join(empty, "weft-stats.0.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r = runFabrun(t, nil, "", "stats", empty); r.Code != 1 || !strings.Contains(r.Stderr, "weft-stats.0.json") {
		t.Errorf("broken file: exit %d\n%s", r.Code, r.Stderr)
	}
	if r = runFabrun(t, nil, "", "stats"); r.Code != 2 {
		t.Errorf("no directory: exit %d\n%s", r.Code, r.Stderr)
	}
}
