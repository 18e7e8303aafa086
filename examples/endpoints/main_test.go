package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/launchtest"
)

// TestRing runs the example as 2 processes × 3 endpoints (6 ranks), private
// and shared, and checks every rank's line.
func TestRing(t *testing.T) {
	for _, shared := range []string{"false", "true"} {
		t.Run("shared="+shared, func(t *testing.T) {
			if !launchtest.IsWorker() {
				launchtest.Run(t, 2, "shm", 60*time.Second)
				return
			}
			var out bytes.Buffer
			if err := run([]string{"-eps", "3", "-shared=" + shared, "-timeout", "30s"}, &out); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 3 {
				t.Fatalf("%d lines: %q", len(lines), out.String())
			}
			for _, l := range lines {
				if !strings.Contains(l, "of 6") || !strings.HasSuffix(l, "ring sum 15 ok") || !strings.Contains(l, "shared="+shared) {
					t.Fatalf("line %q", l)
				}
			}
		})
	}
}
