package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/weft-hpc/weft/test/bench/internal/ddtcases"
)

// TestSmallRun runs every case at the small size with the engines of this
// file (each engine's bytes are checked against the manual loop inside
// bench) and checks the JSON lines.
func TestSmallRun(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-json", "-sizes", "s", "-engines", "manual,interp,copy", "-reps", "1", "-mintime", "0"}, &out); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(&out)
	lines := 0
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		for _, k := range []string{"case", "size", "bytes", "engine", "op", "ns"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("line %q lacks %q", sc.Text(), k)
			}
		}
		if r["ns"].(float64) <= 0 || r["bytes"].(float64) <= 0 {
			t.Fatalf("line %q: non-positive ns or bytes", sc.Text())
		}
		seen[r["case"].(string)] = true
		lines++
	}
	if len(seen) != len(ddtcases.Names()) || lines != len(ddtcases.Names())*3*2 {
		t.Fatalf("%d cases, %d lines; want %d cases, %d lines", len(seen), lines, len(ddtcases.Names()), len(ddtcases.Names())*6)
	}
}

// TestCacheModes runs one case in the cold mode (caches evicted before
// every timed call) and checks that a bad -cache value is refused.
func TestCacheModes(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-json", "-cases", "^milc_su3_zd$", "-sizes", "s", "-engines", "manual,interp", "-reps", "1", "-mintime", "0", "-cache", "cold"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := 0
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if r.NS <= 0 {
			t.Fatalf("line %q: non-positive ns", sc.Text())
		}
		lines++
	}
	if lines != 4 {
		t.Fatalf("%d lines, want 4 (2 engines × pack, unpack)", lines)
	}
	if err := run([]string{"-cache", "lukewarm"}, &out); err == nil {
		t.Fatal("-cache lukewarm accepted")
	}
}
