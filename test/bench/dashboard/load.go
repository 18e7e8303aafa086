package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/weft-hpc/weft/internal/benchrec"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// loadDir reads every *.json (bench -json lines) and *.bench (go test
// -bench output) file of dir.
func loadDir(dir string) ([]benchrec.Record, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files [][]benchrec.Record
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || (!strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".bench")) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		var rs []benchrec.Record
		if strings.HasSuffix(name, ".json") {
			rs, err = parseJSON(f)
		} else {
			rs, err = parseGoBench(f)
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
		files = append(files, rs)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.json or *.bench files", dir)
	}
	inherit(files)
	return slices.Concat(files...), nil
}

// inherit gives the records that lack a machine, commit or Go release
// (ddtbench's lines, go test -bench output) the one that most of the
// directory's files carry: one directory is one run of run.sh, whose files
// agree; a file added from another run is outvoted, and without a
// majority the field stays empty.
func inherit(files [][]benchrec.Record) {
	one := func(get func(benchrec.Record) string) string {
		votes, n := map[string]int{}, 0
		for _, f := range files {
			v, mixed := "", false
			for _, r := range f {
				switch x := get(r); {
				case x == "":
				case v == "":
					v = x
				case x != v:
					mixed = true
				}
			}
			if v == "" {
				continue
			}
			n++
			if !mixed {
				votes[v]++
			}
		}
		for v, c := range votes {
			if 2*c > n {
				return v
			}
		}
		return ""
	}
	m, c, g := one(func(r benchrec.Record) string { return r.Machine }), one(func(r benchrec.Record) string { return r.Commit }), one(func(r benchrec.Record) string { return r.Go })
	for _, f := range files {
		for i := range f {
			if f[i].Machine == "" {
				f[i].Machine = m
			}
			if f[i].Commit == "" {
				f[i].Commit = c
			}
			if f[i].Go == "" {
				f[i].Go = g
			}
		}
	}
}

// parseJSON reads one run's JSON lines: Records of the bench tools, or
// ddtbench's lines, which become one benchrec.Record per engine, case, size and op
// with the hand-written loop ("manual") of the same run as reference, and
// one per engine, case and size for a compile time. Blank lines are
// skipped; anything else is an error naming the line.
func parseJSON(r io.Reader) ([]benchrec.Record, error) {
	var out []benchrec.Record
	var ddt []benchrec.DDTResult
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(line, &keys); err != nil {
			return nil, fmt.Errorf("line %d: %w", ln, err)
		}
		switch {
		case keys["engine"] != nil:
			var d benchrec.DDTResult
			if err := strictDecode(line, &d); err != nil {
				return nil, fmt.Errorf("line %d: %w", ln, err)
			}
			if d.Case == "" || d.Size == "" || d.Op == "" {
				return nil, fmt.Errorf("line %d: ddtbench line without case, size or op", ln)
			}
			ddt = append(ddt, d)
		case keys["tool"] != nil:
			var rec benchrec.Record
			if err := strictDecode(line, &rec); err != nil {
				return nil, fmt.Errorf("line %d: %w", ln, err)
			}
			if rec.Tool == "" || rec.Case == "" || rec.Metric == "" {
				return nil, fmt.Errorf("line %d: record without tool, case or metric", ln)
			}
			if rec.Reps <= 0 {
				rec.Reps = 1
			}
			rec.Runs = 1
			out = append(out, rec)
		default:
			return nil, fmt.Errorf("line %d: neither a bench record (tool) nor a ddtbench line (engine)", ln)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return append(out, ddtRecords(ddt)...), nil
}

func strictDecode(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// ddtRecords turns one ddtbench run into Records (tool ddtbench; area jit
// for the jit engine, ddt otherwise; metric <engine>-<op>, or
// <engine>-compile for a compile time).
func ddtRecords(ls []benchrec.DDTResult) []benchrec.Record {
	type cell struct{ c, s, op string }
	manual := map[cell]float64{}
	for _, l := range ls {
		if l.Engine == "manual" {
			manual[cell{l.Case, l.Size, l.Op}] = l.NS
		}
	}
	var out []benchrec.Record
	compiled := map[cell]bool{}
	for _, l := range ls {
		area := "ddt"
		if l.Engine == "jit" {
			area = "jit"
		}
		r := benchrec.Record{Tool: "ddtbench", Area: area, Case: l.Case, Size: l.Size, Metric: l.Engine + "-" + l.Op,
			Value: l.NS, Unit: "ns", Reps: 1, Stat: "median", Runs: 1}
		if m, ok := manual[cell{l.Case, l.Size, l.Op}]; ok && l.Engine != "manual" && m > 0 {
			r.Ref, r.RefValue, r.Ratio = "manual", m, l.NS/m
		}
		out = append(out, r)
		if k := (cell{l.Case, l.Size, l.Engine}); l.CompileNS > 0 && !compiled[k] {
			compiled[k] = true
			out = append(out, benchrec.Record{Tool: "ddtbench", Area: area, Case: l.Case, Size: l.Size, Metric: l.Engine + "-compile",
				Value: float64(l.CompileNS), Unit: "ns", Reps: 1, Stat: "once", Runs: 1})
		}
	}
	return out
}

var (
	benchPkg  = regexp.MustCompile(`^pkg: (\S+)`)
	benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+(.+)$`)
)

// parseGoBench reads go test -bench output: every "value unit" pair of a
// benchmark line becomes a benchrec.Record (tool gobench, area the package's last
// element, case the benchmark, size its sub-benchmark, metric the unit).
func parseGoBench(r io.Reader) ([]benchrec.Record, error) {
	var out []benchrec.Record
	area := ""
	sc := bufio.NewScanner(r)
	for ln := 1; sc.Scan(); ln++ {
		t := sc.Text()
		if m := benchPkg.FindStringSubmatch(t); m != nil {
			area = m[1][strings.LastIndex(m[1], "/")+1:]
			continue
		}
		m := benchLine.FindStringSubmatch(t)
		if m == nil {
			continue
		}
		name, sub, _ := strings.Cut(m[1], "/")
		f := strings.Fields(m[2])
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("line %d: odd value/unit list %q", ln, m[2])
		}
		for i := 0; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %q: %w", ln, f[i], err)
			}
			out = append(out, benchrec.Record{Tool: "gobench", Area: area, Case: name, Size: sub, Metric: f[i+1],
				Value: v, Reps: 1, Stat: "median", Runs: 1})
		}
	}
	return out, sc.Err()
}

// aggregate merges the records of one key over runs: value, ref_value and
// ratio become the medians over the runs that have them, reps and runs
// add up, commits, machines and notes are joined.
func aggregate(rs []benchrec.Record) []benchrec.Record {
	groups := map[string][]benchrec.Record{}
	var order []string
	for _, r := range rs {
		k := r.Key()
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]benchrec.Record, 0, len(order))
	for _, k := range order {
		g := groups[k]
		a := g[0]
		var vs, refs, ratios []float64
		var commits, machines, gos, notes []string
		a.Reps, a.Runs = 0, 0
		for _, r := range g {
			vs = append(vs, r.Value)
			if r.RefValue != 0 {
				refs = append(refs, r.RefValue)
			}
			if r.Ratio != 0 {
				ratios = append(ratios, r.Ratio)
			}
			a.Reps += r.Reps
			a.Runs += max(r.Runs, 1)
			commits, machines, gos, notes = addUniq(commits, r.Commit), addUniq(machines, r.Machine), addUniq(gos, r.Go), addUniq(notes, r.Note)
			if a.Ref == "" {
				a.Ref = r.Ref
			}
		}
		a.Value, a.RefValue, a.Ratio = median(vs), median(refs), median(ratios)
		a.Commit, a.Machine, a.Go, a.Note = strings.Join(commits, ", "), strings.Join(machines, "; "), strings.Join(gos, ", "), strings.Join(notes, "; ")
		out = append(out, a)
	}
	return out
}

func addUniq(s []string, v string) []string {
	if v == "" || slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// median of v (0 for none; the mean of the middle two for an even count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
