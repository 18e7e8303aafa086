package main

import (
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// results holds every half round trip by contender (typed, manual,
// contig, mpich, openmpi), case ("name/size") and repetition.
type results = sidebyside.Figures[[2]string]

func newResults(reps int) *results { return sidebyside.NewFigures[[2]string](reps) }

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

// keys are the keys of cols in cell.
func keys(cols []string, cell string) [][2]string {
	out := make([][2]string, len(cols))
	for i, c := range cols {
		out[i] = [2]string{c, cell}
	}
	return out
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
		{"typed-vs-manual", "manual", rp.res.Series([2]string{"manual", cell})},
		{"typed-vs-contig", "contig", rp.res.Series([2]string{"contig", cell})},
	}
	if len(rp.mpis) > 0 {
		out = append(out, comparison{"typed-vs-mpi", "best MPI", rp.res.Best(keys(rp.mpis, cell), true)})
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
			s := rp.res.Series([2]string{col, cell})
			if sidebyside.Count(s) == 0 {
				continue
			}
			r := base
			r.Metric, r.Value, r.Reps = col, sidebyside.Median(s), sidebyside.Count(s)
			if col == "typed" {
				r.Note = "jit " + rp.jit[cell]
			}
			rs = append(rs, r)
		}
		typed := rp.res.Series([2]string{"typed", cell})
		for _, q := range rp.refs(cell) {
			if sidebyside.Count(q.ref) == 0 || sidebyside.Count(typed) == 0 {
				continue
			}
			r := base
			r.Metric, r.Value, r.Reps = q.metric, sidebyside.Median(typed), sidebyside.Count(typed)
			r.Ref, r.RefValue, r.Ratio = q.name, sidebyside.Median(q.ref), benchrec.Finite(sidebyside.Median(sidebyside.Ratios(typed, q.ref)))
			rs = append(rs, r)
		}
	}
	return rs
}

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
		typed := rp.res.Series([2]string{"typed", cell})
		for _, q := range rp.refs(cell) {
			r := sidebyside.Median(sidebyside.Ratios(typed, q.ref))
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
			fmt.Fprintf(w, " %9s", sidebyside.Fig(sidebyside.Median(rp.res.Series([2]string{col, cell}))))
		}
		q := rp.refs(cell)
		typed := rp.res.Series([2]string{"typed", cell})
		for i := range 3 {
			r := math.NaN()
			if i < len(q) {
				r = sidebyside.Median(sidebyside.Ratios(typed, q[i].ref))
			}
			fmt.Fprintf(w, " %8s", sidebyside.RatioFig(r))
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
