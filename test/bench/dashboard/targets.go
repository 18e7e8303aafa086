package main

import (
	"fmt"
	"github.com/weft-hpc/weft/internal/benchrec"
	"strings"
)

// Target is one performance target: the record it reads (Key, as
// tool/case/size/metric), the field compared (ratio or value) and the
// threshold.
type Target struct {
	Area  string
	What  string
	Key   string
	Field string // "ratio" or "value"
	Op    string // "<=" or ">="
	Limit float64
}

// targets are the project's performance targets.
var targets = append([]Target{
	{"fabric", "8 B half round trip ≤ 1.15× fi_pingpong (shm)", "pingpong/batch/8/lat", "ratio", "<=", 1.15},
	{"fabric", "1 MiB bandwidth ≥ 0.95× fi_pingpong (shm)", "pingpong/batch/1048576/bw", "ratio", ">=", 0.95},
	{"endpoint", "8 B latency ≤ 1.10× raw fabric/ (shm)", "endpoint/pingpong/8/lat", "ratio", "<=", 1.10},
	{"endpoint", "private ≥ 1.5× shared message rate, 2 goroutines (one process)", "endpoint/inproc-g2/8/msgrate", "ratio", ">=", 1.5},
	{"ddt", "interpreter ≤ 2× hand loop on every cell", "ddtbench/summary/all/interp-worst", "value", "<=", 2},
	{"ddt", "interpreter geomean ≤ 1.5× hand loop", "ddtbench/summary/all/interp-geomean", "value", "<=", 1.5},
	{"ddt", "commit ≤ 5 µs CPU for ≤ 16 nodes (slowest type)", "gobench/Commit/all/cpu-us-max", "value", "<=", 5},
	{"jit", "geomean ≤ 1.0× hand loop", "ddtbench/summary/all/jit-geomean", "value", "<=", 1.0},
	{"jit", "never > 1.25× hand loop", "ddtbench/summary/all/jit-worst", "value", "<=", 1.25},
	{"jit", "≥ 3× interpreter on nested, struct, indexed layouts (weakest family's median)", "ddtbench/summary/all/jit-speedup-min", "value", ">=", 3},
	{"jit", "FFT2 transpose ≥ 3× naive hand loop (weakest cell)", "ddtbench/summary/all/jit-fft2-min", "value", ">=", 3},
	{"jit", "median compile ≤ 20 µs", "ddtbench/summary/all/jit-compile-median", "value", "<=", 20},
	{"jit", "reuses to amortise compilation ≤ 10 (median pack cell)", "ddtbench/summary/all/jit-reuses-median", "value", "<=", 10},
	{"p2p", "8 B half round trip ≤ 1.0× best MPI (one node)", "p2p/weft/8/lat", "ratio", "<=", 1.0},
	{"p2p", "bandwidth ≥ 1.0× best of MPI and fi_pingpong at every size ≥ 64 KiB (weakest size)", "p2p/weft/64k-up/bw-ratio-min", "value", ">=", 1.0},
	{"p2p", "8 B message rate ≥ 1.0× best MPI, 1 sender", "p2p/weft-rate1/8/msgrate", "ratio", ">=", 1.0},
	{"p2p", "8 B message rate ≥ 1.0× best MPI, 1 sender, IsendBatch", "p2p/weft-rate1b/8/msgrate", "ratio", ">=", 1.0},
	{"p2p", "8 B message rate, 2 endpoints of one process ≥ 1.5× best MPI with 2 sender processes", "p2p/weft-rate2ep/8/msgrate", "ratio", ">=", 1.5},
	{"ddtpp", "typed send/recv never slower than hand pack + contiguous send (worst cell)", "ddtpp/summary/all/typed-manual-worst", "value", "<=", 1.0},
	{"ddtpp", "typed send/recv ≤ 1.15× contiguous send of the same bytes (geomean of the cells ≥ 64 KiB)", "ddtpp/summary/64k-up/typed-contig-geomean", "value", "<=", 1.15},
	{"ddtpp", "typed send/recv ≥ 2× faster than the faster of MPICH and Open MPI with the same datatype (geomean of all cells)", "ddtpp/summary/all/typed-mpi-geomean", "value", "<=", 0.5},
	{"onesided", "direct-store PutSignal issue ≤ 0.1 µs (8 B)", "onesided/weft-direct/8/ps_issue", "value", "<=", 0.1},
	{"onesided", "PutSignal ping-pong through libfabric shm ≤ 1.2× fi_pingpong (8 B)", "onesided/weft-shm/8/ps_lat", "ratio", "<=", 1.2},
	{"onesided", "overlap ≥ 90% of ideal max(compute, comm), flag-polled puts", "overlap/put/512x1024-w4/efficiency", "value", ">=", 0.9},
}, osuTargets()...)

// Status values of a target.
const (
	statusMet    = "met"
	statusNotMet = "**not met**"
	statusNoData = "not measured"
)

// evaluate returns the measured figure of t among rs and its status.
func (t Target) evaluate(byKey map[string]benchrec.Record) (float64, string, error) {
	r, ok := byKey[t.Key]
	if !ok {
		return 0, statusNoData, nil
	}
	v := r.Value
	if t.Field == "ratio" {
		v = r.Ratio
	}
	if v == 0 {
		return 0, statusNoData, nil
	}
	switch t.Op {
	case "<=":
		if v <= t.Limit {
			return v, statusMet, nil
		}
	case ">=":
		if v >= t.Limit {
			return v, statusMet, nil
		}
	default:
		return 0, "", fmt.Errorf("target %q: operator %q", t.What, t.Op)
	}
	return v, statusNotMet, nil
}

// targetsTable renders the targets with their measured figures and status.
func targetsTable(rs []benchrec.Record) (string, error) {
	byKey := index(rs)
	var b strings.Builder
	b.WriteString("| area | target | record (tool/case/size/metric) | field | threshold | measured | status |\n")
	b.WriteString("|---|---|---|---|---:|---:|---|\n")
	for _, t := range targets {
		v, st, err := t.evaluate(byKey)
		if err != nil {
			return "", err
		}
		m := "–"
		if st != statusNoData {
			m = num(v)
			if n := byKey[t.Key].Note; n != "" && t.Field == "value" && !strings.HasPrefix(n, "transcribed") {
				m += " (" + firstNote(n) + ")"
			}
		}
		op := map[string]string{"<=": "≤", ">=": "≥"}[t.Op]
		fmt.Fprintf(&b, "| %s | %s | `%s` | %s | %s %s | %s | %s |\n", t.Area, t.What, t.Key, t.Field, op, num(t.Limit), m, st)
	}
	return b.String(), nil
}

// firstNote is the part of a joined note before any provenance.
func firstNote(n string) string {
	var keep []string
	for _, p := range strings.Split(n, "; ") {
		if !strings.HasPrefix(p, "transcribed") {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "; ")
}

func index(rs []benchrec.Record) map[string]benchrec.Record {
	m := make(map[string]benchrec.Record, len(rs))
	for _, r := range rs {
		m[r.Key()] = r
	}
	return m
}
