package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/test/bench/internal/osutargets"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

// report turns the figures into OSU-format blocks, the side-by-side
// table, the targets and the records.
type report struct {
	cfg         *config
	figs        *sidebyside.Figures[cell]
	wefts, mpis []string
}

func (r *report) median(c cell) float64 { return sidebyside.Median(r.figs.Series(c)) }

// ratio is the median over repetitions of c ÷ the faster MPI of the same
// repetition.
func (r *report) ratio(c cell) float64 {
	var refs []cell
	for _, m := range r.mpis {
		refs = append(refs, cell{m, c.np, c.coll, c.size})
	}
	return sidebyside.Median(sidebyside.Ratios(r.figs.Series(c), r.figs.Best(refs, true)))
}

func (r *report) bestMPI(c cell) float64 {
	var refs []cell
	for _, m := range r.mpis {
		refs = append(refs, cell{m, c.np, c.coll, c.size})
	}
	return sidebyside.Median(r.figs.Best(refs, true))
}

// describe says what a contender's ranks are.
func describe(name string, np int) string {
	switch name {
	case "weft":
		return fmt.Sprintf("weft, %d processes", np)
	case "weft-flat":
		return fmt.Sprintf("weft, %d processes, hierarchy off", np)
	case "weft-ep":
		return fmt.Sprintf("weft, %d endpoint handles of one process", np)
	case "mpich":
		return fmt.Sprintf("MPICH, %d processes", np)
	case "openmpi":
		return fmt.Sprintf("Open MPI, %d processes", np)
	}
	return name
}

func (r *report) print(w io.Writer) {
	cfg := r.cfg
	names := append(append([]string(nil), r.wefts...), r.mpis...)
	for _, np := range cfg.nps {
		for _, name := range names {
			for _, k := range cfg.colls {
				fmt.Fprintf(w, "# OSU MPI %s Latency Test (%s; median of %d runs)\n", title(k), describe(name, np), cfg.reps)
				if noData(k) {
					fmt.Fprintf(w, "# Avg Latency(us)\n%18.2f\n\n", r.median(cell{name, np, k, 0}))
					continue
				}
				fmt.Fprintf(w, "# Size       Avg Latency(us)\n")
				for _, s := range cfg.sizes {
					fmt.Fprintf(w, "%-10d%18.2f\n", s, r.median(cell{name, np, k, s}))
				}
				fmt.Fprintln(w)
			}
		}
	}
	fmt.Fprintf(w, "Side by side: median µs over %d runs; weft ÷ the faster MPI, median of the per-run ratios\n", cfg.reps)
	for _, np := range cfg.nps {
		fmt.Fprintf(w, "\n%d ranks\n%-18s", np, "collective size")
		for _, n := range names {
			fmt.Fprintf(w, "%10s", n)
		}
		for _, n := range r.wefts {
			fmt.Fprintf(w, "%10s", n+"÷")
		}
		fmt.Fprintln(w)
		for _, k := range cfg.colls {
			for _, s := range sizesOf(cfg, k) {
				fmt.Fprintf(w, "%-18s", osutargets.Cell(k, s))
				for _, n := range names {
					fmt.Fprintf(w, "%10s", sidebyside.Fig(r.median(cell{n, np, k, s})))
				}
				for _, n := range r.wefts {
					fmt.Fprintf(w, "%10s", sidebyside.RatioFig(r.ratio(cell{n, np, k, s})))
				}
				fmt.Fprintln(w)
			}
		}
	}
	if len(r.mpis) == 0 {
		fmt.Fprintln(w, "\nno MPI ran: no targets")
		return
	}
	fmt.Fprintln(w, "\ntargets (latency ÷ the faster MPI):")
	for _, n := range r.wefts {
		for _, np := range cfg.nps {
			sum := r.summary(n, np)
			fmt.Fprintf(w, "  %s %d ranks: geomean ≤ 1 KiB %s (≤ %.2f: %s), worst cell %s %s (≤ %.2f: %s)",
				n, np, sidebyside.RatioFig(sum.Geomean), osutargets.GeoTarget, met(sum.Geomean <= osutargets.GeoTarget),
				sidebyside.RatioFig(sum.Worst), sum.WorstCell, osutargets.CellTarget, met(sum.Worst <= osutargets.CellTarget))
			if !math.IsNaN(sum.Large) {
				fmt.Fprintf(w, ", ≥ 1 MiB worst %s %s (≤ %.2f: %s)", sidebyside.RatioFig(sum.Large), sum.LargeCell, osutargets.LargeTarget, met(sum.Large <= osutargets.LargeTarget))
			}
			fmt.Fprintln(w)
		}
	}
	if sp := r.epSpeedup(); !math.IsNaN(sp) {
		fmt.Fprintf(w, "  %d-byte Allreduce, %d endpoints of one process vs %d MPI processes: %.1f× faster (≥ %.0f×: %s)\n",
			osutargets.SpeedupSize, osutargets.SpeedupNP, osutargets.SpeedupNP, sp, osutargets.SpeedupMin, met(sp >= osutargets.SpeedupMin))
	}
}

// summary is contender n's targets on np ranks (package osutargets).
func (r *report) summary(n string, np int) osutargets.Summary {
	var rs []osutargets.Ratio
	for _, k := range r.cfg.colls {
		for _, s := range sizesOf(r.cfg, k) {
			rs = append(rs, osutargets.Ratio{Coll: k, Size: s, Ratio: r.ratio(cell{n, np, k, s})})
		}
	}
	return osutargets.Summarise(rs)
}

// epSpeedup is how many times faster the speedup target's cell (weft-ep's
// 8-byte Allreduce on 4 ranks) is than the faster MPI's; NaN where not
// measured.
func (r *report) epSpeedup() float64 {
	return osutargets.Speedup(r.ratio(cell{osutargets.SpeedupContender, osutargets.SpeedupNP, osutargets.SpeedupColl, osutargets.SpeedupSize}))
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func (r *report) records() []benchrec.Record {
	var rs []benchrec.Record
	names := append(append([]string(nil), r.wefts...), r.mpis...)
	for _, np := range r.cfg.nps {
		for _, n := range names {
			for _, k := range r.cfg.colls {
				for _, s := range sizesOf(r.cfg, k) {
					c := cell{n, np, k, s}
					rec := benchrec.Record{Tool: "osu", Area: "collectives", Case: fmt.Sprintf("%s-np%d-%s", n, np, k),
						Size: strconv.Itoa(s), Metric: "lat", Value: r.median(c), Unit: "us", Reps: r.cfg.reps}
					if !strings.HasPrefix(n, "weft") || len(r.mpis) == 0 {
						rs = append(rs, rec)
						continue
					}
					rec.Ref, rec.RefValue, rec.Ratio = "best MPI", r.bestMPI(c), r.ratio(c)
					rs = append(rs, rec)
				}
			}
		}
	}
	return rs
}
