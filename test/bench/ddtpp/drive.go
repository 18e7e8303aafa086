package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/weft-hpc/weft/test/bench/internal/ddtcases"
	"github.com/weft-hpc/weft/test/bench/internal/mpijob"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

//go:embed mpi/ddtpp.c
var mpiSource []byte

// The weft contenders, all measured by one weft job, in the order of the
// tables.
var weftCols = []string{"typed", "manual", "contig"}

// passCols are the weft job's other figures: its typed contender's pack
// and unpack passes timed alone (the packing floor).
var passCols = []string{"pack", "unpack"}

// mpiCols are the contenders an MPI job prints: the typed ping-pong of the
// case's MPI datatype (mpi) and the contiguous ping-pong of the same bytes
// (mpicontig).
var mpiCols = []string{"mpi", "mpicontig"}

// contigSuffix names an MPI's contiguous contender after the MPI:
// mpich-contig, openmpi-contig.
const contigSuffix = "-contig"

// A job is one contender's job of a repetition: the weft job (which
// measures the three weft contenders) or one MPI's.
type job struct {
	name string   // weft, mpich, openmpi
	argv []string // the whole command line but the recipe
	weft bool
}

// drive sets the jobs up, runs the repetitions and reports.
func drive(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "weft-ddtpp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	recipePath := filepath.Join(tmp, "recipe")
	f, err := os.Create(recipePath)
	if err != nil {
		return err
	}
	err = writeRecipe(f, cfg.cases, func(c *ddtcases.Case) (int, int) {
		n := sidebyside.ItersFor(cfg.iters, cfg.minIters, c.Bytes)
		return n, sidebyside.WarmupFor(n)
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	want, err := expectedSums(cfg.cases)
	if err != nil {
		return err
	}
	jobs, err := setup(ctx, cfg, tmp, stderr)
	if err != nil {
		return err
	}
	res := newResults(cfg.reps)
	jit := map[string]string{}
	for rep := range cfg.reps {
		for _, j := range mpijob.Rotate(jobs, rep) {
			argv := append(append([]string(nil), j.argv...), recipePath)
			if j.weft {
				argv = append(argv, strconv.Itoa(cfg.rounds))
			}
			out, err := mpijob.Run(ctx, cfg.timeout, argv)
			if err != nil {
				return fmt.Errorf("rep %d, %s: %w", rep+1, j.name, err)
			}
			o, err := parseOutput(out)
			if err != nil {
				return fmt.Errorf("rep %d, %s: %w", rep+1, j.name, err)
			}
			if err := o.check(cfg.cases, want, j.weft); err != nil {
				return fmt.Errorf("rep %d, %s: %w", rep+1, j.name, err)
			}
			line := fmt.Sprintf("rep %d %s:", rep+1, j.name)
			for _, c := range cfg.cases {
				k := c.String()
				if j.weft {
					for _, col := range append(slices.Clone(weftCols), passCols...) {
						res.Add([2]string{col, k}, rep, o.lat[[2]string{col, k}])
					}
					jit[k] = o.jit[k]
				} else {
					for _, col := range mpiCols {
						res.Add([2]string{colName(col, j.name), k}, rep, o.lat[[2]string{col, k}])
					}
				}
			}
			for _, col := range o.cols {
				line += fmt.Sprintf(" %s %.3f us (geomean),", colName(col, j.name), geomean(o.bycol(col)))
			}
			fmt.Fprintln(stderr, strings.TrimSuffix(line, ","))
		}
	}
	rp := &report{cfg: cfg, res: res, jit: jit}
	for _, j := range jobs {
		if !j.weft {
			rp.mpis = append(rp.mpis, j.name)
		}
	}
	return sidebyside.Output(cfg.jsonOut, stdout, stderr, rp.print, rp.records)
}

// colName is the column an output's contender name stands for in job j:
// mpi is the MPI's own name, mpicontig the MPI's name and contigSuffix.
func colName(col, j string) string {
	switch col {
	case "mpi":
		return j
	case "mpicontig":
		return j + contigSuffix
	}
	return col
}

// setup builds the weft job's command line and the MPI programs; an MPI
// that cannot run here is left out with a note on stderr.
func setup(ctx context.Context, cfg *config, tmp string, stderr io.Writer) ([]*job, error) {
	w, err := mpijob.NewWeft(ctx, cfg.fabrun, tmp, cfg.provider, cfg.timeout)
	if err != nil {
		return nil, err
	}
	jobs := []*job{{name: "weft", weft: true,
		argv: append(w.Launch(2, []string{"WEFT_NODE_TRANSPORT=" + cfg.transport}), "-role", "weft")}}
	for _, p := range mpijob.BuildAll(ctx, cfg.refs, mpiSource, tmp, "ddtpp", stderr) {
		jobs = append(jobs, &job{name: p.Name, argv: append(p.Launch(2), p.Path)})
	}
	return jobs, nil
}

// sums are a case's expected hashes: of its packed stream of pattern 1 and
// of its typed buffer, zeroed, after unpacking pattern 2.
type sums struct{ pack, unpack uint64 }

// expectedSums computes every case's hashes with ddt's Pack and Unpack.
func expectedSums(cases []*ddtcases.Case) (map[string]sums, error) {
	out := map[string]sums{}
	for _, c := range cases {
		typed := make([]byte, c.Typed)
		ddtcases.Fill(typed, 1)
		packed := make([]byte, c.Bytes)
		if _, err := c.Type.Pack(packed, typed, c.Count); err != nil {
			return nil, fmt.Errorf("%v: %w", c, err)
		}
		var s sums
		s.pack = hash(packed)
		ddtcases.Fill(packed, 2)
		clear(typed)
		if _, err := c.Type.Unpack(typed, packed, c.Count); err != nil {
			return nil, fmt.Errorf("%v: %w", c, err)
		}
		s.unpack = hash(typed)
		out[c.String()] = s
	}
	return out, nil
}

// hash is the FNV-1a 64-bit hash, as the ranks compute it.
func hash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// output is what one job printed (rank 0's lines).
type output struct {
	lat  map[[2]string]float64 // contender (typed, manual, contig, mpi, mpicontig) and case → µs
	sums map[string]sums
	jit  map[string]string // case → compiled or interpreted (weft)
	cols []string          // contenders in the order first seen
}

// bycol is every case's figure of contender col.
func (o *output) bycol(col string) []float64 {
	var v []float64
	for k, x := range o.lat {
		if k[0] == col {
			v = append(v, x)
		}
	}
	return v
}

var outLine = regexp.MustCompile(`^(SUM|RESULT|JIT) (\S+) (\S+) (\S+) (\S+)$`)

// parseOutput reads the SUM, RESULT and JIT lines of a job's output; other
// lines (launcher chatter) are ignored. A malformed figure or a line given
// twice is an error.
func parseOutput(out []byte) (*output, error) {
	o := &output{lat: map[[2]string]float64{}, sums: map[string]sums{}, jit: map[string]string{}}
	seen := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		m := outLine.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		key := m[1] + " " + m[2] + " " + m[3] + " " + m[4]
		if seen[key] {
			return nil, fmt.Errorf("line %q given twice", l)
		}
		seen[key] = true
		k := m[3] + "/" + m[4]
		switch m[1] {
		case "SUM":
			h, err := strconv.ParseUint(m[5], 16, 64)
			if err != nil || len(m[5]) != 16 {
				return nil, fmt.Errorf("bad hash in %q", l)
			}
			s := o.sums[k]
			switch m[2] {
			case "pack":
				s.pack = h
			case "unpack":
				s.unpack = h
			default:
				return nil, fmt.Errorf("bad SUM line %q", l)
			}
			o.sums[k] = s
		case "RESULT":
			v, err := strconv.ParseFloat(m[5], 64)
			if err != nil || !(v > 0) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("bad figure in %q", l)
			}
			o.lat[[2]string{m[2], k}] = v
			if !slices.Contains(o.cols, m[2]) {
				o.cols = append(o.cols, m[2])
			}
		case "JIT":
			if m[2] != "state" || (m[5] != "compiled" && m[5] != "interpreted") {
				return nil, fmt.Errorf("bad JIT line %q", l)
			}
			o.jit[k] = m[5]
		}
	}
	return o, nil
}

// errMismatch marks a job whose layout differs from ddt's.
var errMismatch = errors.New("layout differs from ddt's")

// check verifies that the job measured every case (the three weft
// contenders, or the MPI's typed and contiguous ping-pongs) and that its
// hashes are ddt's.
func (o *output) check(cases []*ddtcases.Case, want map[string]sums, weft bool) error {
	cols := mpiCols
	if weft {
		cols = append(slices.Clone(weftCols), passCols...)
	}
	for _, c := range cases {
		k := c.String()
		for _, col := range cols {
			if _, ok := o.lat[[2]string{col, k}]; !ok {
				return fmt.Errorf("%v: no %s result", c, col)
			}
		}
		got, ok := o.sums[k]
		if !ok {
			return fmt.Errorf("%v: no SUM lines", c)
		}
		if w := want[k]; got.pack != w.pack {
			return fmt.Errorf("%v: packed stream hashes to %016x, ddt's to %016x: %w", c, got.pack, w.pack, errMismatch)
		} else if got.unpack != w.unpack {
			return fmt.Errorf("%v: unpacked buffer hashes to %016x, ddt's to %016x: %w", c, got.unpack, w.unpack, errMismatch)
		}
		if weft && o.jit[k] == "" {
			return fmt.Errorf("%v: no JIT line", c)
		}
	}
	return nil
}
