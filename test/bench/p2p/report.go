package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// cell names one measured figure of one contender: the column, the metric
// (lat, bw, msgrate) and the label (message bytes, or the rate case).
type cell struct{ col, metric, label string }

// results holds every figure by cell and repetition.
type results = sidebyside.Figures[cell]

func newResults(reps int) *results { return sidebyside.NewFigures[cell](reps) }

// cells are the cells of cols for metric and label.
func cells(cols []string, metric, label string) []cell {
	out := make([]cell, len(cols))
	for i, c := range cols {
		out[i] = cell{c, metric, label}
	}
	return out
}

// report turns results into tables and records.
type report struct {
	cfg   *config
	res   *results
	wefts []string // weft columns
	fi    string   // the fi_pingpong column, if it ran
	mpis  []string // MPI columns
	// floor columns (floor/floor.c): shown, never a reference
	floors []string
}

// A comparison is one row of a table: which figure, compared with what.
type comparison struct {
	metric, label string
	lower         bool     // lower is better (latency)
	refCols       []string // the references of the ratio
	refMetric     string   // the references' metric and label (2ep: the MPIs' case 2)
	refLabel      string
	refName       string // Record.Ref
}

// comparisons are the rows: latency and bandwidth per size, then the rate
// cases.
func (rp *report) comparisons() []comparison {
	var cs []comparison
	bwRefs := append(slices.Clone(rp.mpis), rp.fi)
	if rp.fi == "" {
		bwRefs = rp.mpis
	}
	for _, m := range []string{"lat", "bw"} {
		for _, s := range rp.cfg.sizes {
			l := strconv.Itoa(s)
			c := comparison{metric: m, label: l, lower: m == "lat", refCols: rp.mpis, refMetric: m, refLabel: l, refName: "best MPI"}
			if m == "bw" {
				c.refCols, c.refName = bwRefs, "best of MPI, fi_pingpong"
				if rp.fi == "" {
					c.refName = "best MPI"
				}
			}
			cs = append(cs, c)
		}
	}
	for _, l := range rp.cfg.rates {
		c := comparison{metric: "msgrate", label: l, refCols: rp.mpis, refMetric: "msgrate", refLabel: mpiRate[l], refName: "best MPI"}
		if mpiRate[l] == "2" {
			c.refName = "best MPI 2 senders"
		}
		cs = append(cs, c)
	}
	return cs
}

// ref is the per-repetition best reference of c.
func (rp *report) ref(c comparison) []float64 {
	return rp.res.Best(cells(c.refCols, c.refMetric, c.refLabel), c.lower)
}

// units of the metrics.
var units = map[string]string{"lat": "us", "bw": "MB/s", "msgrate": "msg/s"}

// records are the -json lines: every column's median of every figure it
// measured, the weft columns with their reference and ratio.
func (rp *report) records() []benchrec.Record {
	var rs []benchrec.Record
	cols := append(append(append(slices.Clone(rp.wefts), rp.mpis...), rp.fi), rp.floors...)
	for _, c := range rp.comparisons() {
		ref := rp.ref(c)
		for _, col := range cols {
			if col == "" {
				continue
			}
			s := rp.res.Series(cell{col, c.metric, c.label})
			if sidebyside.Count(s) == 0 {
				continue
			}
			r := benchrec.Record{Tool: "p2p", Area: "p2p", Case: col, Size: c.label, Metric: c.metric, Unit: units[c.metric],
				Value: sidebyside.Median(s), Reps: sidebyside.Count(s), Stat: "median"}
			if c.metric == "msgrate" {
				r.Case, r.Size = col+"-rate"+c.label, strconv.Itoa(rp.cfg.msgSize)
			}
			if slices.Contains(rp.wefts, col) && sidebyside.Count(ref) > 0 {
				r.Ref, r.RefValue, r.Ratio = c.refName, sidebyside.Median(ref), benchrec.Finite(sidebyside.Median(sidebyside.Ratios(s, ref)))
			}
			rs = append(rs, r)
		}
	}
	return rs
}

// targets are issue 19's, checked on the first weft column.
var targets = []struct {
	what   string
	metric string
	labels func(sizes []int) []string
	limit  float64
	lower  bool
}{
	{"8 B half round trip ≤ 1.0× best MPI", "lat", func([]int) []string { return []string{"8"} }, 1.0, true},
	{"bandwidth ≥ 1.0× best of MPI and fi_pingpong at every size ≥ 64 KiB", "bw", func(sz []int) []string {
		var l []string
		for _, s := range sz {
			if s >= 64<<10 {
				l = append(l, strconv.Itoa(s))
			}
		}
		return l
	}, 1.0, false},
	{"message rate ≥ 1.0× best MPI, 1 sender", "msgrate", func([]int) []string { return []string{"1"} }, 1.0, false},
	{"message rate, 2 endpoints of one process ≥ 1.5× best MPI with 2 senders", "msgrate", func([]int) []string { return []string{"2ep"} }, 1.5, false},
}

// print writes the tables.
func (rp *report) print(w io.Writer) {
	ppCols := append(append(append(slices.Clone(rp.wefts), rp.fi), rp.mpis...), rp.floors...)
	rateCols := append(slices.Clone(rp.wefts), rp.mpis...)
	if slices.Contains(rp.floors, "floor") {
		rateCols = append(rateCols, "floor")
	}
	if rp.fi == "" {
		ppCols = append(slices.Clone(rp.wefts), rp.mpis...)
		ppCols = append(ppCols, rp.floors...)
	}
	fmt.Fprintf(w, "medians of %d repetitions; ratio: median over repetitions of weft ÷ the best reference of the same repetition\n", rp.cfg.reps)
	byMetric := map[string][]comparison{}
	for _, c := range rp.comparisons() {
		byMetric[c.metric] = append(byMetric[c.metric], c)
	}
	titles := []struct{ metric, title, label string }{
		{"lat", "ping-pong half round trip (µs); ratio against the best MPI", "bytes"},
		{"bw", "ping-pong bandwidth (MB/s = 10^6 B/s); ratio against the best of the MPIs and fi_pingpong", "bytes"},
		{"msgrate", fmt.Sprintf("message rate (msg/s), %d B, window %d; 1 and 2 sender processes, 2ep: 2 endpoints of one process (ratio against the MPIs' 2 senders); 1b, 2epb: 1 and 2ep with IsendBatch", rp.cfg.msgSize, rp.cfg.window), "case"},
	}
	for _, t := range titles {
		rows := byMetric[t.metric]
		if len(rows) == 0 {
			continue
		}
		cols := ppCols
		if t.metric == "msgrate" {
			cols = rateCols // fi_pingpong has no rate
		}
		fmt.Fprintf(w, "\n%s\n%8s", t.title, t.label)
		for _, c := range cols {
			fmt.Fprintf(w, " %12s", c)
		}
		fmt.Fprintf(w, " %12s", "best ref")
		for _, c := range rp.wefts {
			fmt.Fprintf(w, " %12s", c+"/ref")
		}
		fmt.Fprintln(w)
		for _, c := range rows {
			fmt.Fprintf(w, "%8s", c.label)
			for _, col := range cols {
				fmt.Fprintf(w, " %12s", fig(sidebyside.Median(rp.res.Series(cell{col, c.metric, c.label}))))
			}
			ref := rp.ref(c)
			fmt.Fprintf(w, " %12s", fig(sidebyside.Median(ref)))
			for _, col := range rp.wefts {
				fmt.Fprintf(w, " %12s", sidebyside.RatioFig(sidebyside.Median(sidebyside.Ratios(rp.res.Series(cell{col, c.metric, c.label}), ref))))
			}
			fmt.Fprintln(w)
		}
	}
	if len(rp.wefts) == 0 || len(rp.mpis) == 0 {
		return
	}
	col := rp.wefts[0]
	fmt.Fprintf(w, "\ntargets (issue 19), %s:\n", col)
	for _, t := range targets {
		worst, where := math.NaN(), ""
		for _, c := range byMetric[t.metric] {
			if !slices.Contains(t.labels(rp.cfg.sizes), c.label) {
				continue
			}
			q := sidebyside.Median(sidebyside.Ratios(rp.res.Series(cell{col, c.metric, c.label}), rp.ref(c)))
			if math.IsNaN(q) {
				continue
			}
			if math.IsNaN(worst) || (t.lower && q > worst) || (!t.lower && q < worst) {
				worst, where = q, c.label
			}
		}
		status := "not measured"
		switch {
		case math.IsNaN(worst):
		case (t.lower && worst <= t.limit) || (!t.lower && worst >= t.limit):
			status = fmt.Sprintf("met (%.2f at %s)", worst, where)
		default:
			status = fmt.Sprintf("NOT met (%.2f at %s)", worst, where)
		}
		fmt.Fprintf(w, "  %s: %s\n", t.what, status)
	}
}

// fig formats a figure as sidebyside.Fig does, millions (message rates)
// with an M suffix.
func fig(v float64) string {
	if math.Abs(v) >= 1e6 {
		return fmt.Sprintf("%.2fM", v/1e6)
	}
	return sidebyside.Fig(v)
}
