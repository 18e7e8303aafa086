// Package sidebyside holds what the bench tools that measure weft side by
// side with references share (test/bench/p2p, test/bench/ddtpp): their
// figures by repetition, the medians and per-repetition ratios the tables
// report, the formats of the tables' figures, the command-line flags every
// such tool takes and the way a tool writes its results.
//
// The machine these tools run on changes speed from one job to the next,
// so a ratio is taken within each repetition, between contenders run back
// to back, and the median of those ratios reported; a figure missing from
// a repetition (NaN) leaves that repetition out.
package sidebyside

import (
	"math"
	"slices"
)

// Figures holds one figure per repetition for every key (a contender and
// what it measured); a repetition without the figure holds NaN.
type Figures[K comparable] struct {
	reps int
	v    map[K][]float64
}

// NewFigures holds the figures of reps repetitions.
func NewFigures[K comparable](reps int) *Figures[K] {
	return &Figures[K]{reps: reps, v: map[K][]float64{}}
}

// Add records v as k's figure of repetition rep.
func (f *Figures[K]) Add(k K, rep int, v float64) {
	s, ok := f.v[k]
	if !ok {
		s = NaNs(f.reps)
		f.v[k] = s
	}
	s[rep] = v
}

// Series is k's figure by repetition (all NaN when never measured); the
// caller must not change it.
func (f *Figures[K]) Series(k K) []float64 {
	if s, ok := f.v[k]; ok {
		return s
	}
	return NaNs(f.reps)
}

// Best is, per repetition, the best figure among keys: the lowest when
// lower is better, else the highest; NaN where none of them has one.
func (f *Figures[K]) Best(keys []K, lower bool) []float64 {
	out := NaNs(f.reps)
	for i := range out {
		for _, k := range keys {
			v := f.Series(k)[i]
			if math.IsNaN(v) {
				continue
			}
			if math.IsNaN(out[i]) || (lower && v < out[i]) || (!lower && v > out[i]) {
				out[i] = v
			}
		}
	}
	return out
}

// NaNs is n NaNs.
func NaNs(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// Ratios is ours ÷ ref element by element: NaN where either is missing
// (or ref is not positive).
func Ratios(ours, ref []float64) []float64 {
	out := NaNs(len(ours))
	for i := range ours {
		if i < len(ref) && ref[i] > 0 {
			out[i] = ours[i] / ref[i]
		}
	}
	return out
}

// Median of the figures that are not NaN; NaN when there are none.
func Median(v []float64) float64 {
	var s []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Count is the number of figures that are not NaN.
func Count(v []float64) int {
	n := 0
	for _, x := range v {
		if !math.IsNaN(x) {
			n++
		}
	}
	return n
}
