package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/test/bench/internal/osutargets"
)

// osuCase splits a case of test/bench/osu's records,
// <contender>-np<ranks>-<collective>.
var osuCase = regexp.MustCompile(`^(.+)-np(\d+)-([a-z]+)$`)

// osuCell is one record of test/bench/osu, its case split.
type osuCell struct {
	contender string
	np        int
	coll      string
	size      int
	r         benchrec.Record
}

// osuCells are the latency records of test/bench/osu in their order.
func osuCells(rs []benchrec.Record) []osuCell {
	var out []osuCell
	for _, r := range rs {
		if r.Tool != "osu" || r.Metric != "lat" {
			continue
		}
		m := osuCase.FindStringSubmatch(r.Case)
		if m == nil {
			continue
		}
		np, err1 := strconv.Atoi(m[2])
		size, err2 := strconv.Atoi(r.Size)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, osuCell{m[1], np, m[3], size, r})
	}
	return out
}

// osuSummaryCase is the case of the summary records of contender c on np
// ranks.
func osuSummaryCase(c string, np int) string { return fmt.Sprintf("%s-np%d", c, np) }

// Sizes and metrics of the summary records deriveOSU makes.
const (
	osuSmall      = "1k-down/lat-ratio-geomean"
	osuWorst      = "all/lat-ratio-worst"
	osuLarge      = "1m-up/lat-ratio-worst"
	osuSpeedupKey = "8/speedup"
)

// deriveOSU summarises test/bench/osu's records the way osu itself does
// (package osutargets): per weft contender and rank count, the geometric
// mean of the ratios to the faster MPI over sizes ≤ 1 KiB, the worst
// ratio and the worst at ≥ 1 MiB; and the 8-byte Allreduce speedup of 4
// endpoints of one process over 4 MPI processes. Cells without a ratio
// (no MPI ran) give nothing.
func deriveOSU(rs []benchrec.Record) []benchrec.Record {
	type group struct {
		c                      string
		np                     int
		ratios                 []osutargets.Ratio
		reps                   int
		machines, commits, gos []string
	}
	var order []*group
	groups := map[string]*group{}
	var out []benchrec.Record
	for _, c := range osuCells(rs) {
		if !strings.HasPrefix(c.contender, "weft") || c.r.Ratio <= 0 {
			continue
		}
		k := osuSummaryCase(c.contender, c.np)
		g := groups[k]
		if g == nil {
			g = &group{c: c.contender, np: c.np}
			groups[k] = g
			order = append(order, g)
		}
		g.ratios = append(g.ratios, osutargets.Ratio{Coll: c.coll, Size: c.size, Ratio: c.r.Ratio})
		g.reps = max(g.reps, c.r.Reps)
		g.machines, g.commits, g.gos = addUniq(g.machines, c.r.Machine), addUniq(g.commits, c.r.Commit), addUniq(g.gos, c.r.Go)
		if c.contender == osutargets.SpeedupContender && c.np == osutargets.SpeedupNP && c.coll == osutargets.SpeedupColl && c.size == osutargets.SpeedupSize {
			r := c.r
			out = append(out, benchrec.Record{Tool: "osu", Area: "collectives", Case: r.Case, Size: r.Size, Metric: "speedup",
				Value: osutargets.Speedup(r.Ratio), Stat: "median", Reps: r.Reps, Runs: r.Runs, Machine: r.Machine, Commit: r.Commit, Go: r.Go})
		}
	}
	for _, g := range order {
		s := osutargets.Summarise(g.ratios)
		rec := func(key string, v float64, stat, note string) {
			if math.IsNaN(v) {
				return
			}
			size, metric, _ := strings.Cut(key, "/")
			out = append(out, benchrec.Record{Tool: "osu", Area: "collectives", Case: osuSummaryCase(g.c, g.np), Size: size, Metric: metric,
				Value: v, Note: note, Stat: stat, Reps: g.reps, Runs: 1,
				Machine: strings.Join(g.machines, "; "), Commit: strings.Join(g.commits, ", "), Go: strings.Join(g.gos, ", ")})
		}
		rec(osuSmall, s.Geomean, "geomean", fmt.Sprintf("%d cells", s.Small))
		rec(osuWorst, s.Worst, "max", s.WorstCell)
		rec(osuLarge, s.Large, "max", s.LargeCell)
	}
	return out
}

// osuTargets are the collectives' targets: per weft contender and rank
// count of the dashboard's run, and the endpoint speedup.
func osuTargets() []Target {
	var ts []Target
	for _, c := range []struct{ name, ranks string }{{"weft", "processes"}, {"weft-ep", "endpoints of one process"}} {
		for _, np := range []int{2, 4} {
			who := fmt.Sprintf("%s, %d %s", c.name, np, c.ranks)
			k := "osu/" + osuSummaryCase(c.name, np) + "/"
			ts = append(ts,
				Target{"collectives", "latency ≤ 1.0× the faster MPI, geomean of sizes ≤ 1 KiB (" + who + ")", k + osuSmall, "value", "<=", osutargets.GeoTarget},
				Target{"collectives", "latency never > 1.25× the faster MPI, worst cell (" + who + ")", k + osuWorst, "value", "<=", osutargets.CellTarget},
				Target{"collectives", "time ≤ 1.0× the faster MPI at ≥ 1 MiB, worst cell (" + who + ")", k + osuLarge, "value", "<=", osutargets.LargeTarget})
		}
	}
	return append(ts, Target{"collectives",
		fmt.Sprintf("%d B Allreduce, %d endpoints of one process ≥ 5× faster than %d MPI processes", osutargets.SpeedupSize, osutargets.SpeedupNP, osutargets.SpeedupNP),
		fmt.Sprintf("osu/%s-np%d-%s/%s", osutargets.SpeedupContender, osutargets.SpeedupNP, osutargets.SpeedupColl, osuSpeedupKey), "value", ">=", osutargets.SpeedupMin})
}

// osuTable renders test/bench/osu's records compactly: one row per
// collective and rank count with, per weft contender, the geometric mean
// of its ratios to the faster MPI over sizes ≤ 1 KiB and its worst ratio
// at ≥ 1 MiB, then the faster MPI's latency at the smallest and the
// largest size.
func osuTable(rs []benchrec.Record) (string, error) {
	type row struct {
		coll string
		np   int
	}
	var rows []row
	var wefts []string
	ratios := map[row]map[string][]osutargets.Ratio{}
	ref := map[row]map[int]float64{} // the faster MPI's median by size
	reps := map[row]int{}
	for _, c := range osuCells(rs) {
		if !strings.HasPrefix(c.contender, "weft") {
			continue
		}
		k := row{c.coll, c.np}
		if ratios[k] == nil {
			ratios[k], ref[k] = map[string][]osutargets.Ratio{}, map[int]float64{}
			rows = append(rows, k)
		}
		wefts = addUniq(wefts, c.contender)
		ratios[k][c.contender] = append(ratios[k][c.contender], osutargets.Ratio{Coll: c.coll, Size: c.size, Ratio: c.r.Ratio})
		if c.r.RefValue > 0 {
			ref[k][c.size] = c.r.RefValue
		}
		reps[k] = max(reps[k], c.r.Reps)
	}
	if len(rows) == 0 {
		return "No data: run `make bench-dashboard`.\n", nil
	}
	var b strings.Builder
	b.WriteString("| collective | ranks |")
	for _, w := range wefts {
		fmt.Fprintf(&b, " %s ÷ MPI, ≤ 1 KiB | %s ÷ MPI, ≥ 1 MiB |", w, w)
	}
	b.WriteString(" faster MPI, smallest size (µs) | faster MPI, largest size (µs) | reps |\n|---|---:|")
	b.WriteString(strings.Repeat("---:|", 2*len(wefts)+3) + "\n")
	for _, k := range rows {
		fmt.Fprintf(&b, "| %s | %d |", k.coll, k.np)
		for _, w := range wefts {
			s := osutargets.Summarise(ratios[k][w])
			fmt.Fprintf(&b, " %s | %s |", num(benchrec.Finite(s.Geomean)), num(benchrec.Finite(s.Large)))
		}
		lo, hi := -1, -1
		for s := range ref[k] {
			if lo < 0 || s < lo {
				lo = s
			}
			if s > hi {
				hi = s
			}
		}
		at := func(s int) string {
			if s == 0 { // the barrier
				return num(ref[k][s])
			}
			l := osutargets.SizeLabel(s)
			switch l[len(l)-1] {
			case 'K', 'M':
				l = l[:len(l)-1] + " " + l[len(l)-1:] + "iB"
			default:
				l += " B"
			}
			return num(ref[k][s]) + " (" + l + ")"
		}
		small, large := "–", "–"
		if lo >= 0 {
			small = at(lo)
			if hi > lo {
				large = at(hi)
			}
		}
		fmt.Fprintf(&b, " %s | %s | %d |\n", small, large, reps[k])
	}
	return b.String(), nil
}
