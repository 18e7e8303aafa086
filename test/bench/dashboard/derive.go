package main

import (
	"fmt"
	"github.com/weft-hpc/weft/internal/benchrec"
	"math"
	"strconv"
	"strings"
)

// structFamilies are the DDTBench layouts of the "nested, struct, indexed"
// target: nested vectors (MILC), a strided single-element layout (NAS MG
// x), index lists (SPECFEM3D) and index lists of structs (LAMMPS).
var structFamilies = []string{"milc_su3_zd", "nas_mg_x", "specfem3d_oc", "specfem3d_cm", "lammps_full", "lammps_atomic"}

// derive computes the summary records the targets name from the per-cell
// records of ddtbench and go test -bench (after aggregate). A summary that
// is already among rs (transcribed figures) is not derived again.
func derive(rs []benchrec.Record) []benchrec.Record {
	have := map[string]bool{}
	cells := map[string]benchrec.Record{}
	for _, r := range rs {
		have[r.Key()] = true
		cells[r.Key()] = r
	}
	var out []benchrec.Record
	add := func(r benchrec.Record) {
		if r.Stat == "" {
			r.Stat = "median"
		}
		if !have[r.Key()] {
			out = append(out, r)
			have[r.Key()] = true
		}
	}
	// ddtbench: geomean and worst ratio to the hand loop per engine.
	type agg struct {
		logs  float64
		n     int
		worst float64
		where string
	}
	engines := map[string]*agg{}
	var engOrder []string
	var compiles, reuses []float64
	fam := map[string][]float64{}
	fftMin, fftWhere := math.Inf(1), ""
	var machines, commits, gos []string
	for _, r := range rs {
		if r.Tool != "ddtbench" || r.Case == "summary" {
			continue
		}
		machines, commits, gos = addUniq(machines, r.Machine), addUniq(commits, r.Commit), addUniq(gos, r.Go)
		eng, op, _ := strings.Cut(r.Metric, "-")
		if op == "compile" {
			if eng == "jit" {
				compiles = append(compiles, r.Value)
			}
			continue
		}
		if eng == "manual" || r.Ratio <= 0 {
			continue
		}
		a := engines[eng]
		if a == nil {
			a = &agg{}
			engines[eng] = a
			engOrder = append(engOrder, eng)
		}
		a.logs += math.Log(r.Ratio)
		a.n++
		if r.Ratio > a.worst {
			a.worst, a.where = r.Ratio, fmt.Sprintf("%s %s %s", r.Case, r.Size, op)
		}
		if eng != "jit" {
			continue
		}
		interp, ok := cells[strings.Join([]string{"ddtbench", r.Case, r.Size, "interp-" + op}, "/")]
		if ok && r.Value > 0 {
			fam[r.Case] = append(fam[r.Case], interp.Value/r.Value)
			comp, ok := cells[strings.Join([]string{"ddtbench", r.Case, r.Size, "jit-compile"}, "/")]
			if ok && op == "pack" && interp.Value > r.Value {
				reuses = append(reuses, comp.Value/(interp.Value-r.Value))
			}
		}
		if r.Case == "fft2" && 1/r.Ratio < fftMin {
			fftMin, fftWhere = 1/r.Ratio, fmt.Sprintf("fft2 %s %s", r.Size, op)
		}
	}
	sum := func(metric string, v float64, unit, note string) benchrec.Record {
		return benchrec.Record{Tool: "ddtbench", Area: "jit", Case: "summary", Size: "all", Metric: metric, Value: v, Unit: unit, Note: note, Reps: 1, Runs: 1,
			Machine: strings.Join(machines, "; "), Commit: strings.Join(commits, ", "), Go: strings.Join(gos, ", ")}
	}
	for _, e := range engOrder {
		a := engines[e]
		area := "ddt"
		if e == "jit" {
			area = "jit"
		}
		g := sum(e+"-geomean", math.Exp(a.logs/float64(a.n)), "", fmt.Sprintf("%d cells", a.n))
		w := sum(e+"-worst", a.worst, "", a.where)
		g.Area, w.Area = area, area
		add(g)
		add(w)
	}
	if len(compiles) > 0 {
		add(sum("jit-compile-median", median(compiles)/1e3, "us", fmt.Sprintf("%d types", len(compiles))))
	}
	if len(reuses) > 0 {
		add(sum("jit-reuses-median", median(reuses), "", fmt.Sprintf("%d pack cells", len(reuses))))
	}
	famMin, famWhere := math.Inf(1), ""
	for _, f := range structFamilies {
		if v, ok := fam[f]; ok {
			m := median(v)
			add(sum("jit-speedup-"+f, m, "", "interp ÷ jit, median over sizes and ops"))
			if m < famMin {
				famMin, famWhere = m, f
			}
		}
	}
	if v, ok := fam["fft2"]; ok {
		add(sum("jit-speedup-fft2", median(v), "", "interp ÷ jit, median over sizes and ops"))
	}
	if famWhere != "" {
		add(sum("jit-speedup-min", famMin, "", famWhere))
	}
	if fftWhere != "" {
		add(sum("jit-fft2-min", fftMin, "", fftWhere+" (hand loop ÷ jit)"))
	}
	// p2p: the weakest bandwidth ratio of weft at 64 KiB and above.
	var weakest benchrec.Record
	for _, r := range rs {
		if r.Tool != "p2p" || r.Case != "weft" || r.Metric != "bw" || r.Ratio <= 0 {
			continue
		}
		if n, err := strconv.Atoi(r.Size); err == nil && n >= 64<<10 && (weakest.Ratio == 0 || r.Ratio < weakest.Ratio) {
			weakest = r
		}
	}
	if weakest.Ratio > 0 {
		add(benchrec.Record{Tool: "p2p", Area: "p2p", Case: "weft", Size: "64k-up", Metric: "bw-ratio-min", Value: weakest.Ratio,
			Note: "at " + weakest.Size + " B", Stat: "min", Reps: weakest.Reps, Runs: weakest.Runs, Machine: weakest.Machine, Commit: weakest.Commit, Go: weakest.Go})
	}
	// ddtpp: typed messages against hand packing, a contiguous send and the
	// best MPI, and the floor (the fastest contiguous send) against the best
	// MPI, over the cells (each cell's ratio already the median over
	// repetitions and runs).
	for _, r := range deriveDDTPP(rs) {
		add(r)
	}
	// osu: the collectives' targets per weft contender and rank count.
	for _, r := range deriveOSU(rs) {
		add(r)
	}
	// go test -bench Commit ./ddt: the slowest type's CPU time.
	var worst benchrec.Record
	for _, r := range rs {
		if r.Tool == "gobench" && r.Case == "Commit" && r.Metric == "cpu-ns/op" && r.Size != "all" && r.Value > worst.Value {
			worst = r
		}
	}
	if worst.Value > 0 {
		add(benchrec.Record{Tool: "gobench", Area: "ddt", Case: "Commit", Size: "all", Metric: "cpu-us-max", Value: worst.Value / 1e3, Unit: "us", Note: worst.Size,
			Stat: "max", Reps: worst.Reps, Runs: worst.Runs, Machine: worst.Machine, Commit: worst.Commit, Go: worst.Go})
	}
	return out
}

// deriveDDTPP summarises test/bench/ddtpp's typed-vs-* records: the worst
// and the geometric mean of typed ÷ manual over all cells, of typed ÷
// contig over the cells of at least 64 KiB, and of typed ÷ best MPI over
// all cells; and its floor-vs-mpi records: the geometric mean of floor ÷
// best MPI over all cells (floor-mpi-geomean, no worst), the lowest
// typed-mpi-geomean a typed send could reach.
func deriveDDTPP(rs []benchrec.Record) []benchrec.Record {
	type agg struct {
		logs    float64
		n       int
		worst   float64
		where   string
		machine []string
		commit  []string
		gos     []string
		reps    int
	}
	aggs := map[string]*agg{}
	for _, r := range rs {
		if r.Tool != "ddtpp" || r.Case == "summary" || r.Ratio <= 0 {
			continue
		}
		key := ""
		switch r.Metric {
		case "typed-vs-manual":
			key = "all/typed-manual"
		case "typed-vs-contig":
			if r.Bytes < 64<<10 {
				continue
			}
			key = "64k-up/typed-contig"
		case "typed-vs-mpi":
			key = "all/typed-mpi"
		case "floor-vs-mpi":
			key = "all/floor-mpi"
		default:
			continue
		}
		a := aggs[key]
		if a == nil {
			a = &agg{}
			aggs[key] = a
		}
		a.logs += math.Log(r.Ratio)
		a.n++
		if r.Ratio > a.worst {
			a.worst, a.where = r.Ratio, r.Case+" "+r.Size
		}
		a.machine, a.commit, a.gos = addUniq(a.machine, r.Machine), addUniq(a.commit, r.Commit), addUniq(a.gos, r.Go)
		a.reps = max(a.reps, r.Reps)
	}
	var out []benchrec.Record
	for _, key := range []string{"all/typed-manual", "64k-up/typed-contig", "all/typed-mpi", "all/floor-mpi"} {
		a := aggs[key]
		if a == nil {
			continue
		}
		size, metric, _ := strings.Cut(key, "/")
		rec := func(m string, v float64, stat, note string) benchrec.Record {
			return benchrec.Record{Tool: "ddtpp", Area: "ddtpp", Case: "summary", Size: size, Metric: m, Value: v, Note: note,
				Stat: stat, Reps: a.reps, Runs: 1, Machine: strings.Join(a.machine, "; "), Commit: strings.Join(a.commit, ", "), Go: strings.Join(a.gos, ", ")}
		}
		geo := math.Exp(a.logs / float64(a.n))
		if key == "all/floor-mpi" {
			out = append(out, rec(metric+"-geomean", geo, "geomean", fmt.Sprintf("%d cells; no typed send can go below this", a.n)))
			continue
		}
		out = append(out, rec(metric+"-geomean", geo, "geomean", fmt.Sprintf("%d cells", a.n)),
			rec(metric+"-worst", a.worst, "max", a.where))
	}
	return out
}
