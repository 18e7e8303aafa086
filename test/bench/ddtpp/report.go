package main

import (
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/weft-hpc/weft/internal/benchrec"
)

// results holds every half round trip by contender (typed, manual,
// contig, mpich, openmpi), case ("name/size") and repetition; a
// repetition without the figure holds NaN.
type results struct {
	reps int
	v    map[[2]string][]float64
}

func newResults(reps int) *results { return &results{reps: reps, v: map[[2]string][]float64{}} }

// add records v for repetition rep.
func (r *results) add(col, cell string, rep int, v float64) {
	k := [2]string{col, cell}
	s, ok := r.v[k]
	if !ok {
		s = nans(r.reps)
		r.v[k] = s
	}
	s[rep] = v
}

func nans(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// series is the figure by repetition (all NaN when never measured).
func (r *results) series(col, cell string) []float64 {
	if s, ok := r.v[[2]string{col, cell}]; ok {
		return s
	}
	return nans(r.reps)
}

// best is, per repetition, the lowest figure among cols (NaN where none
// has one).
func (r *results) best(cols []string, cell string) []float64 {
	out := nans(r.reps)
	for i := range out {
		for _, c := range cols {
			if v := r.series(c, cell)[i]; !math.IsNaN(v) && (math.IsNaN(out[i]) || v < out[i]) {
				out[i] = v
			}
		}
	}
	return out
}

// ratios is ours ÷ ref element by element (NaN where either is missing).
func ratios(ours, ref []float64) []float64 {
	out := nans(len(ours))
	for i := range ours {
		if i < len(ref) && ref[i] > 0 {
			out[i] = ours[i] / ref[i]
		}
	}
	return out
}

// median of the figures that are not NaN; NaN when there are none.
func median(v []float64) float64 {
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

// count is the number of figures that are not NaN.
func count(v []float64) int {
	n := 0
	for _, x := range v {
		if !math.IsNaN(x) {
			n++
		}
	}
	return n
}

// geomean of the figures that are positive; NaN when there are none.
func geomean(v []float64) float64 {
	s, n := 0.0, 0
	for _, x := range v {
		if x > 0 && !math.IsInf(x, 0) {
			s += math.Log(x)
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return math.Exp(s / float64(n))
}

// report turns results into tables and records.
type report struct {
	cfg  *config
	res  *results
	mpis []string          // the MPI columns that ran
	jit  map[string]string // case → the typed contender's JIT state
}

// A comparison is one reference of the typed contender: the record's
// metric, the reference's name and its figures by repetition.
type comparison struct {
	metric, name string
	ref          []float64
}

// refs are the typed contender's comparisons in cell: with manual, with
// contig and, when an MPI ran, with the best MPI of each repetition.
func (rp *report) refs(cell string) []comparison {
	out := []comparison{
		{"typed-vs-manual", "manual", rp.res.series("manual", cell)},
		{"typed-vs-contig", "contig", rp.res.series("contig", cell)},
	}
	if len(rp.mpis) > 0 {
		out = append(out, comparison{"typed-vs-mpi", "best MPI", rp.res.best(rp.mpis, cell)})
	}
	return out
}

// cols are the table's contender columns.
func (rp *report) cols() []string { return append(slices.Clone(weftCols), rp.mpis...) }

// records are the -json lines.
func (rp *report) records() []benchrec.Record {
	var rs []benchrec.Record
	for _, c := range rp.cfg.cases {
		cell := c.String()
		base := benchrec.Record{Tool: "ddtpp", Area: "ddtpp", Case: c.Name, Size: c.Size, Bytes: c.Bytes, Unit: "us", Stat: "median"}
		for _, col := range rp.cols() {
			s := rp.res.series(col, cell)
			if count(s) == 0 {
				continue
			}
			r := base
			r.Metric, r.Value, r.Reps = col, median(s), count(s)
			if col == "typed" {
				r.Note = "jit " + rp.jit[cell]
			}
			rs = append(rs, r)
		}
		typed := rp.res.series("typed", cell)
		for _, q := range rp.refs(cell) {
			if count(q.ref) == 0 || count(typed) == 0 {
				continue
			}
			r := base
			r.Metric, r.Value, r.Reps = q.metric, median(typed), count(typed)
			r.Ref, r.RefValue, r.Ratio = q.name, median(q.ref), benchrec.Finite(median(ratios(typed, q.ref)))
			rs = append(rs, r)
		}
	}
	return rs
}

func writeRecords(w io.Writer, rs []benchrec.Record) error { return benchrec.Write(w, rs) }

// summary is one summary figure of the typed contender over cells.
type summary struct {
	what  string
	value float64
	where string // the worst cell, or how many cells
	limit float64
}

// summaries are issue 20's three figures: the worst typed ÷ manual, the
// geometric mean of typed ÷ contig over the cells of at least 64 KiB and
// of typed ÷ best MPI over all cells (each cell's ratio the median over
// repetitions).
func (rp *report) summaries() []summary {
	worst, where := math.NaN(), ""
	var big, mpi []float64
	for _, c := range rp.cfg.cases {
		cell := c.String()
		typed := rp.res.series("typed", cell)
		for _, q := range rp.refs(cell) {
			r := median(ratios(typed, q.ref))
			if math.IsNaN(r) {
				continue
			}
			switch q.metric {
			case "typed-vs-manual":
				if math.IsNaN(worst) || r > worst {
					worst, where = r, c.Name+" "+c.Size
				}
			case "typed-vs-contig":
				if c.Bytes >= 64<<10 {
					big = append(big, r)
				}
			case "typed-vs-mpi":
				mpi = append(mpi, r)
			}
		}
	}
	return []summary{
		{"typed ÷ manual, worst cell (target ≤ 1.0)", worst, where, 1.0},
		{"typed ÷ contig, geomean of the cells ≥ 64 KiB (target ≤ 1.15)", geomean(big), fmt.Sprintf("%d cells", len(big)), 1.15},
		{"typed ÷ best MPI, geomean of all cells (target ≤ 0.5)", geomean(mpi), fmt.Sprintf("%d cells", len(mpi)), 0.5},
	}
}

// print writes the table and the summaries.
func (rp *report) print(w io.Writer) {
	fmt.Fprintf(w, "half round trip (µs), medians of %d repetitions; ratios: medians over repetitions of typed ÷ reference in the same repetition\n", rp.cfg.reps)
	fmt.Fprintf(w, "%-20s %4s %9s", "case", "size", "bytes")
	for _, c := range rp.cols() {
		fmt.Fprintf(w, " %9s", c)
	}
	fmt.Fprintf(w, " %8s %8s %8s %s\n", "/manual", "/contig", "/bestMPI", "jit")
	for _, c := range rp.cfg.cases {
		cell := c.String()
		fmt.Fprintf(w, "%-20s %4s %9d", c.Name, c.Size, c.Bytes)
		for _, col := range rp.cols() {
			fmt.Fprintf(w, " %9s", fig(median(rp.res.series(col, cell))))
		}
		q := rp.refs(cell)
		typed := rp.res.series("typed", cell)
		for i := range 3 {
			r := math.NaN()
			if i < len(q) {
				r = median(ratios(typed, q[i].ref))
			}
			fmt.Fprintf(w, " %8s", ratioFig(r))
		}
		fmt.Fprintf(w, " %s\n", rp.jit[cell])
	}
	fmt.Fprintln(w, "\ntargets (issue 20):")
	for _, s := range rp.summaries() {
		status := "not measured"
		switch {
		case math.IsNaN(s.value):
		case s.value <= s.limit:
			status = fmt.Sprintf("met (%.3f, %s)", s.value, s.where)
		default:
			status = fmt.Sprintf("NOT met (%.3f, %s)", s.value, s.where)
		}
		fmt.Fprintf(w, "  %s: %s\n", s.what, status)
	}
}

// fig formats a figure with precision to suit its magnitude.
func fig(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "–"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func ratioFig(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}
