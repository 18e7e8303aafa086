package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// results holds every half round trip by contender (typed, manual,
// contig, mpich, openmpi, mpich-contig, openmpi-contig), case
// ("name/size") and repetition.
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
		out = append(out, comparison{"typed-vs-mpi", "best MPI", rp.bestMPI(cell)})
	}
	return out
}

// bestMPI is, per repetition, the faster MPI's typed figure in cell.
func (rp *report) bestMPI(cell string) []float64 { return rp.res.Best(keys(rp.mpis, cell), true) }

// mpiContigs are the MPIs' contiguous contenders (mpich-contig,
// openmpi-contig) of the MPIs that ran.
func (rp *report) mpiContigs() []string {
	out := make([]string, len(rp.mpis))
	for i, m := range rp.mpis {
		out[i] = m + contigSuffix
	}
	return out
}

// floorCols are the contiguous contenders the floor is the fastest of:
// weft's contig and every MPI's contiguous ping-pong.
func (rp *report) floorCols() []string { return append([]string{"contig"}, rp.mpiContigs()...) }

// floor is, per repetition, the fastest contiguous send of cell's bytes
// (the lowest of floorCols): what no typed send of the layout can beat,
// however good its datatype engine.
func (rp *report) floor(cell string) []float64 { return rp.res.Best(keys(rp.floorCols(), cell), true) }

// floorRatio is the median over repetitions of the floor ÷ the best MPI's
// typed figure in cell: the lowest typed ÷ best MPI any typed send could
// reach. NaN when no MPI ran.
func (rp *report) floorRatio(cell string) float64 {
	if len(rp.mpis) == 0 {
		return math.NaN()
	}
	return sidebyside.Median(sidebyside.Ratios(rp.floor(cell), rp.bestMPI(cell)))
}

// cols are the table's contender columns: weft's, its passes, the MPIs'
// typed ones, then the MPIs' contiguous ones.
func (rp *report) cols() []string {
	return append(append(append(slices.Clone(weftCols), passCols...), rp.mpis...), rp.mpiContigs()...)
}

// packFloor is, per repetition, the larger of the typed contender's pack
// and unpack passes timed alone: a pipelined send overlaps at best the
// sender's pack with the receiver's unpack, so no typed send of this
// datatype engine that packs can take less.
func (rp *report) packFloor(cell string) []float64 {
	return larger(rp.res.Series([2]string{"pack", cell}), rp.res.Series([2]string{"unpack", cell}))
}

// lowest is, per repetition, the least a typed send of cell can take: the
// larger of the floor (the fastest contiguous send, where an MPI's ran)
// and the packing floor.
func (rp *report) lowest(cell string) []float64 { return larger(rp.floor(cell), rp.packFloor(cell)) }

// larger is, per repetition, the larger of a and b; NaN where either is
// missing.
func larger(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = math.NaN()
		if i < len(b) && !math.IsNaN(a[i]) && !math.IsNaN(b[i]) {
			out[i] = max(a[i], b[i])
		}
	}
	return out
}

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
		if pf, ct := rp.packFloor(cell), rp.res.Series([2]string{"contig", cell}); sidebyside.Count(pf) > 0 && sidebyside.Count(ct) > 0 {
			r := base
			r.Metric, r.Value, r.Reps = "packfloor-vs-contig", sidebyside.Median(pf), sidebyside.Count(pf)
			r.Ref, r.RefValue, r.Ratio = "contig", sidebyside.Median(ct), benchrec.Finite(sidebyside.Median(sidebyside.Ratios(pf, ct)))
			r.Note = "packing floor: the larger of the pack and unpack passes alone"
			rs = append(rs, r)
		}
		if len(rp.mpis) > 0 {
			floor, best := rp.floor(cell), rp.bestMPI(cell)
			if sidebyside.Count(floor) > 0 && sidebyside.Count(best) > 0 {
				r := base
				r.Metric, r.Value, r.Reps = "floor-vs-mpi", sidebyside.Median(floor), sidebyside.Count(floor)
				r.Ref, r.RefValue, r.Ratio = "best MPI", sidebyside.Median(best), benchrec.Finite(rp.floorRatio(cell))
				r.Note = "floor: fastest of " + strings.Join(rp.floorCols(), ", ")
				rs = append(rs, r)
			}
		}
	}
	return rs
}

// summary is one summary figure over cells: a target's, or (info) one
// printed for information, without a target.
type summary struct {
	what  string
	value float64
	where string // the worst cell, or how many cells
	limit float64
	info  bool // no target: limit unused
}

// summaries are issue 20's three figures: the worst typed ÷ manual, the
// geometric mean of typed ÷ contig over the cells of at least 64 KiB and
// of typed ÷ best MPI over all cells (each cell's ratio the median over
// repetitions); then, for information, the geometric mean over all cells
// of the floor ÷ best MPI, and the same two geometric means as the
// targets' with the lowest (max of the floor and the packing floor) in
// place of typed: the least either figure could be with this datatype
// engine.
func (rp *report) summaries() []summary {
	worst, where := math.NaN(), ""
	var big, mpi, floor, bigLow, mpiLow []float64
	for _, c := range rp.cfg.cases {
		cell := c.String()
		if r := rp.floorRatio(cell); !math.IsNaN(r) {
			floor = append(floor, r)
		}
		low := rp.lowest(cell)
		if c.Bytes >= 64<<10 {
			if r := sidebyside.Median(sidebyside.Ratios(low, rp.res.Series([2]string{"contig", cell}))); !math.IsNaN(r) {
				bigLow = append(bigLow, r)
			}
		}
		if len(rp.mpis) > 0 {
			if r := sidebyside.Median(sidebyside.Ratios(low, rp.bestMPI(cell))); !math.IsNaN(r) {
				mpiLow = append(mpiLow, r)
			}
		}
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
		{"typed ÷ manual, worst cell (target ≤ 1.0)", worst, where, 1.0, false},
		{"typed ÷ contig, geomean of the cells ≥ 64 KiB (target ≤ 1.15)", geomean(big), fmt.Sprintf("%d cells", len(big)), 1.15, false},
		{"typed ÷ best MPI, geomean of all cells (target ≤ 0.5)", geomean(mpi), fmt.Sprintf("%d cells", len(mpi)), 0.5, false},
		{"floor (fastest contiguous send of the same bytes) ÷ best MPI typed, geomean of all cells", geomean(floor), fmt.Sprintf("%d cells", len(floor)), 0, true},
		{"lowest (max of the floor, pack and unpack) ÷ contig, geomean of the cells ≥ 64 KiB", geomean(bigLow), fmt.Sprintf("%d cells", len(bigLow)), 0, true},
		{"lowest ÷ best MPI typed, geomean of all cells", geomean(mpiLow), fmt.Sprintf("%d cells", len(mpiLow)), 0, true},
	}
}

// print writes the table and the summaries.
func (rp *report) print(w io.Writer) {
	fmt.Fprintf(w, "half round trip (µs), medians of %d repetitions; ratios: medians over repetitions of typed ÷ reference in the same repetition\n", rp.cfg.reps)
	if len(rp.mpis) > 0 {
		fmt.Fprintf(w, "floor/MPI: the fastest of %s ÷ the best MPI (typed), per repetition, the medians\n", strings.Join(rp.floorCols(), ", "))
	}
	fmt.Fprintln(w, "pack, unpack: the typed contender's passes timed alone, both ranks at once (the slower rank's mean); lowest: max(floor, pack, unpack), what no typed send that packs can beat")
	fmt.Fprintf(w, "%-20s %4s %9s", "case", "size", "bytes")
	for _, c := range rp.cols() {
		fmt.Fprintf(w, " %*s", max(9, len(c)), c)
	}
	fmt.Fprintf(w, " %8s %8s %8s %9s %s\n", "/manual", "/contig", "/bestMPI", "floor/MPI", "jit")
	for _, c := range rp.cfg.cases {
		cell := c.String()
		fmt.Fprintf(w, "%-20s %4s %9d", c.Name, c.Size, c.Bytes)
		for _, col := range rp.cols() {
			fmt.Fprintf(w, " %*s", max(9, len(col)), sidebyside.Fig(sidebyside.Median(rp.res.Series([2]string{col, cell}))))
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
		fmt.Fprintf(w, " %9s %s\n", sidebyside.RatioFig(rp.floorRatio(cell)), rp.jit[cell])
	}
	fmt.Fprintln(w, "\ntargets (issue 20):")
	for _, s := range rp.summaries() {
		status := "not measured"
		switch {
		case math.IsNaN(s.value):
		case s.info:
			status = fmt.Sprintf("floor %.3f (%s)", s.value, s.where)
		case s.value <= s.limit:
			status = fmt.Sprintf("met (%.3f, %s)", s.value, s.where)
		default:
			status = fmt.Sprintf("NOT met (%.3f, %s)", s.value, s.where)
		}
		fmt.Fprintf(w, "  %s: %s\n", s.what, status)
	}
	fmt.Fprintln(w, "    (no target on the floor and lowest lines: a typed send cannot beat a contiguous send of its bytes, nor, if it packs, its engine's slower pass; when a lowest figure is above its target (1.15, 0.5), that target is out of reach of this datatype engine)")
}
