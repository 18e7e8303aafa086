package main

import (
	"fmt"
	"github.com/weft-hpc/weft/internal/benchrec"
	"math"
	"regexp"
	"slices"
	"strings"
)

// sections are the generated parts of the page, by marker name.
var sections = map[string]func([]benchrec.Record) (string, error){
	"targets":  targetsTable,
	"machine":  machineTable,
	"fabric":   table(func(r benchrec.Record) bool { return r.Tool == "pingpong" }),
	"endpoint": table(func(r benchrec.Record) bool { return r.Tool == "endpoint" }),
	"onesided": table(func(r benchrec.Record) bool { return r.Tool == "onesided" }),
	"overlap":  table(func(r benchrec.Record) bool { return r.Tool == "overlap" && r.Metric != "t" }),
	"p2p":      p2pTable,
	"ddtpp":    ddtppTable,
	"osu":      osuTable,
	"ddt": table(func(r benchrec.Record) bool {
		return (r.Tool == "ddtbench" && r.Case == "summary") || (r.Tool == "gobench" && r.Size == "all")
	}),
}

// num formats a figure with precision to suit its magnitude.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "–"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.1:
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

// table renders the records keep selects, in their order.
func table(keep func(benchrec.Record) bool) func([]benchrec.Record) (string, error) {
	return func(rs []benchrec.Record) (string, error) {
		var b strings.Builder
		b.WriteString("| case | size | metric | value | unit | reference | reference value | ratio | reps | note |\n")
		b.WriteString("|---|---:|---|---:|---|---|---:|---:|---:|---|\n")
		n := 0
		for _, r := range rs {
			if !keep(r) {
				continue
			}
			n++
			ref := r.Ref
			if ref == "" {
				ref = "–"
			}
			unit := r.Unit
			if unit == "" {
				unit = "–"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n",
				r.Case, orDash(r.Size), r.Metric, num(r.Value), unit, ref, num(r.RefValue), num(r.Ratio), r.Reps, orDash(firstNote(r.Note)))
		}
		if n == 0 {
			return "No data: run `make bench-dashboard`.\n", nil
		}
		return b.String(), nil
	}
}

// p2pTable renders the records of test/bench/p2p as one row per figure
// (metric and size, or rate case) and one column per contender: each weft
// column with its ratio to the row's reference, then fi_pingpong and the
// MPIs, then the reference and its median.
func p2pTable(rs []benchrec.Record) (string, error) {
	type row struct{ metric, label string }
	var rows []row
	var wefts, refs []string
	vals := map[row]map[string]benchrec.Record{}
	for _, r := range rs {
		if r.Tool != "p2p" || r.Stat == "min" {
			continue
		}
		col, label := r.Case, r.Size
		if i := strings.LastIndex(col, "-rate"); i >= 0 && r.Metric == "msgrate" {
			col, label = col[:i], col[i+len("-rate"):]
		}
		k := row{r.Metric, label}
		if vals[k] == nil {
			vals[k] = map[string]benchrec.Record{}
			rows = append(rows, k)
		}
		vals[k][col] = r
		if strings.HasPrefix(col, "weft") {
			wefts = addUniq(wefts, col)
		} else {
			refs = addUniq(refs, col)
		}
	}
	if len(rows) == 0 {
		return "No data: run `make bench-dashboard`.\n", nil
	}
	order := map[string]int{"fi_pingpong": 1, "mpich": 2, "openmpi": 3}
	slices.SortStableFunc(refs, func(a, b string) int { return order[a] - order[b] })
	var b strings.Builder
	b.WriteString("| metric | size or case |")
	for _, w := range wefts {
		fmt.Fprintf(&b, " %s | %s ÷ reference |", w, w)
	}
	for _, r := range refs {
		fmt.Fprintf(&b, " %s |", r)
	}
	b.WriteString(" reference | reference value | reps |\n|---|---:|")
	b.WriteString(strings.Repeat("---:|---:|", len(wefts)) + strings.Repeat("---:|", len(refs)) + "---|---:|---:|\n")
	for _, k := range rows {
		v := vals[k]
		unit := ""
		for _, r := range v {
			unit = r.Unit
		}
		fmt.Fprintf(&b, "| %s (%s) | %s |", k.metric, unit, k.label)
		var lead benchrec.Record
		for _, w := range wefts {
			r, ok := v[w]
			if !ok {
				b.WriteString(" – | – |")
				continue
			}
			if lead.Ref == "" {
				lead = r
			}
			fmt.Fprintf(&b, " %s | %s |", num(r.Value), num(r.Ratio))
		}
		for _, c := range refs {
			fmt.Fprintf(&b, " %s |", num(v[c].Value))
		}
		fmt.Fprintf(&b, " %s | %s | %d |\n", orDash(lead.Ref), num(lead.RefValue), lead.Reps)
	}
	return b.String(), nil
}

// ddtppTable renders the records of test/bench/ddtpp: one row per layout
// and size with every contender's half round trip (weft's, the MPIs'
// typed, then the MPIs' contiguous ones) and the typed contender's three
// ratios, and the floor ÷ best MPI when any cell has one (floor-vs-mpi),
// then the summaries over the cells.
func ddtppTable(rs []benchrec.Record) (string, error) {
	type cell struct{ c, s string }
	var cells []cell
	var mpis []string
	floor := false // some cell has a floor-vs-mpi record
	vals := map[cell]map[string]benchrec.Record{}
	for _, r := range rs {
		if r.Tool != "ddtpp" || r.Case == "summary" {
			continue
		}
		k := cell{r.Case, r.Size}
		if vals[k] == nil {
			vals[k] = map[string]benchrec.Record{}
			cells = append(cells, k)
		}
		vals[k][r.Metric] = r
		switch {
		case r.Metric == "floor-vs-mpi":
			floor = true
		case r.Metric != "typed" && r.Metric != "manual" && r.Metric != "contig" && !strings.Contains(r.Metric, "-vs-"):
			mpis = addUniq(mpis, r.Metric)
		}
	}
	if len(cells) == 0 {
		return "No data: run `make bench-ddtpp`.\n", nil
	}
	order := map[string]int{"mpich": 1, "openmpi": 2, "mpich-contig": 3, "openmpi-contig": 4}
	slices.SortStableFunc(mpis, func(a, b string) int { return order[a] - order[b] })
	cols := append([]string{"typed", "manual", "contig"}, mpis...)
	ratios := []string{"typed-vs-manual", "typed-vs-contig", "typed-vs-mpi"}
	var b strings.Builder
	b.WriteString("| case | size | bytes |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %s (µs) |", c)
	}
	b.WriteString(" typed ÷ manual | typed ÷ contig | typed ÷ best MPI |")
	if floor {
		ratios = append(ratios, "floor-vs-mpi")
		b.WriteString(" floor ÷ best MPI |")
	}
	b.WriteString(" reps | typed's type |\n|---|---|---:|")
	b.WriteString(strings.Repeat("---:|", len(cols)+len(ratios)+1) + "---|\n")
	for _, k := range cells {
		v := vals[k]
		t := v["typed"]
		fmt.Fprintf(&b, "| %s | %s | %d |", k.c, k.s, t.Bytes)
		for _, c := range cols {
			fmt.Fprintf(&b, " %s |", num(v[c].Value))
		}
		for _, m := range ratios {
			fmt.Fprintf(&b, " %s |", num(v[m].Ratio))
		}
		fmt.Fprintf(&b, " %d | %s |\n", t.Reps, orDash(strings.TrimPrefix(firstNote(t.Note), "jit ")))
	}
	sum, err := table(func(r benchrec.Record) bool { return r.Tool == "ddtpp" && r.Case == "summary" })(rs)
	if err != nil {
		return "", err
	}
	return b.String() + "\n" + sum, nil
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// machineTable names, per area, the machines, commits and Go releases the
// figures come from, the placement probe's readings before and after the
// area's run (tool probe, size before or after: run.sh), and says when
// the figures were transcribed.
func machineTable(rs []benchrec.Record) (string, error) {
	type prov struct {
		machines, commits, gos []string
		before, after          float64
	}
	var areas []string
	by := map[string]*prov{}
	transcribed := false
	for _, r := range rs {
		if strings.Contains(r.Note, "transcribed") {
			transcribed = true
		}
		if r.Tool == "probe" {
			continue
		}
		p := by[r.Area]
		if p == nil {
			p = &prov{}
			by[r.Area] = p
			areas = append(areas, r.Area)
		}
		for _, m := range strings.Split(r.Machine, "; ") {
			p.machines = addUniq(p.machines, m)
		}
		for _, c := range strings.Split(r.Commit, ", ") {
			p.commits = addUniq(p.commits, c)
		}
		for _, g := range strings.Split(r.Go, ", ") {
			p.gos = addUniq(p.gos, g)
		}
	}
	probed := false
	for _, r := range rs {
		p := by[r.Area]
		if r.Tool != "probe" || p == nil {
			continue
		}
		probed = true
		switch r.Size {
		case "before":
			p.before = r.Value
		case "after":
			p.after = r.Value
		}
	}
	slices.Sort(areas)
	var b strings.Builder
	if transcribed {
		b.WriteString("Figures transcribed from the last measured runs; regenerate with `make bench-dashboard`.\n\n")
	}
	if !probed {
		b.WriteString("| area | machine | commit | Go |\n|---|---|---|---|\n")
	} else {
		b.WriteString("| area | machine | commit | Go | placement probe before → after (µs) |\n|---|---|---|---|---|\n")
	}
	for _, a := range areas {
		p := by[a]
		c := strings.Join(p.commits, ", ")
		if c == "" {
			c = "not recorded"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |", a, orDash(strings.Join(p.machines, "; ")), c, orDash(strings.Join(p.gos, ", ")))
		if probed {
			fmt.Fprintf(&b, " %s → %s |", probeCell(p.before), probeCell(p.after))
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// probeCell formats one reading of the placement probe (0: none).
func probeCell(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

var marker = regexp.MustCompile(`<!-- dashboard:([a-z0-9]+) (begin|end) -->`)

// rewrite replaces the text between every <!-- dashboard:NAME begin -->
// and <!-- dashboard:NAME end --> pair of doc with section NAME rendered
// from rs. Text outside the markers is kept byte for byte, so rewriting
// its own output with the same records changes nothing.
func rewrite(doc string, rs []benchrec.Record) (string, error) {
	var b strings.Builder
	locs := marker.FindAllStringSubmatchIndex(doc, -1)
	if len(locs) == 0 {
		return "", fmt.Errorf("no <!-- dashboard:NAME begin --> markers")
	}
	prev := 0
	for i := 0; i < len(locs); i += 2 {
		begin := locs[i]
		name, kind := doc[begin[2]:begin[3]], doc[begin[4]:begin[5]]
		if kind != "begin" {
			return "", fmt.Errorf("marker %q: end without begin", name)
		}
		if i+1 >= len(locs) {
			return "", fmt.Errorf("marker %q: begin without end", name)
		}
		end := locs[i+1]
		if doc[end[2]:end[3]] != name || doc[end[4]:end[5]] != "end" {
			return "", fmt.Errorf("marker %q: begin followed by %s", name, doc[end[0]:end[1]])
		}
		gen, ok := sections[name]
		if !ok {
			return "", fmt.Errorf("marker %q: no such section (have %v)", name, sectionNames())
		}
		text, err := gen(rs)
		if err != nil {
			return "", err
		}
		b.WriteString(doc[prev:begin[1]])
		b.WriteString("\n")
		b.WriteString(text)
		b.WriteString(doc[end[0]:end[1]])
		prev = end[1]
	}
	b.WriteString(doc[prev:])
	return b.String(), nil
}

func sectionNames() []string {
	var n []string
	for k := range sections {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}
