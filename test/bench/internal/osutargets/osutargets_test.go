package osutargets

import (
	"math"
	"testing"
)

func TestSummarise(t *testing.T) {
	s := Summarise([]Ratio{
		{"barrier", 0, 0.5},
		{"allreduce", 8, 2},
		{"allreduce", 1 << 10, 1},
		{"allreduce", 64 << 10, 3}, // neither small nor large
		{"allreduce", 1 << 20, 0.9},
		{"alltoall", 1 << 20, 1.1},
		{"bcast", 8, math.NaN()}, // not measured: left out
		{"bcast", 64, 0},
	})
	if s.Small != 3 || math.Abs(s.Geomean-1) > 1e-12 { // ∛(0.5 × 2 × 1)
		t.Errorf("geomean %v over %d cells, want 1 over 3", s.Geomean, s.Small)
	}
	if s.Worst != 3 || s.WorstCell != "allreduce 64K" {
		t.Errorf("worst %v at %q", s.Worst, s.WorstCell)
	}
	if s.Large != 1.1 || s.LargeCell != "alltoall 1M" {
		t.Errorf("large %v at %q", s.Large, s.LargeCell)
	}
	e := Summarise([]Ratio{{"bcast", 8, math.NaN()}})
	if !math.IsNaN(e.Geomean) || !math.IsNaN(e.Worst) || !math.IsNaN(e.Large) || e.Small != 0 {
		t.Errorf("no ratios: %+v", e)
	}
	if w := Summarise([]Ratio{{"barrier", 0, 2}}); w.WorstCell != "barrier" || !math.IsNaN(w.Large) {
		t.Errorf("barrier only: %+v", w)
	}
}

func TestSpeedupAndLabels(t *testing.T) {
	if Speedup(0.25) != 4 || !math.IsNaN(Speedup(math.NaN())) || !math.IsNaN(Speedup(0)) {
		t.Error("Speedup")
	}
	for s, want := range map[int]string{8: "8", 1000: "1000", 1 << 10: "1K", 64 << 10: "64K", 1 << 20: "1M", 3 << 19: "1536K"} {
		if got := SizeLabel(s); got != want {
			t.Errorf("SizeLabel(%d) = %q, want %q", s, got, want)
		}
	}
}
