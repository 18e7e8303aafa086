// Command halo measures a two-dimensional halo exchange on one node, the
// neighbourhood collective of a stencil code, side by side with MPI: NP
// ranks on a PY×PX grid (endpoint.DimsCreate, MPI_Dims_create; not
// periodic: on a periodic grid of extent 2 the rank above and the rank
// below are one, and MPI libraries before MPI 4 pair their blocks
// differently),
// each owning an N×N block of float64 with one ghost layer, exchange the
// block's four edges with their neighbours — rows contiguous, columns one
// float64 every row (a vector type), sent and received in place. The
// contenders:
//
//	neighbor  weft: one collectives.NeighborAlltoallw per exchange over
//	          the grid (endpoint.Cart)
//	p2p       weft: the same exchange by eight persistent typed requests
//	          (Comm.SendInit/RecvInit, StartAllInto, WaitAll), as
//	          examples/halo does
//	mpich     mpi/halo.c built with mpicc.mpich: MPI_Neighbor_alltoallw
//	          over MPI_Cart_create's communicator with MPI_Type_vector
//	          columns, run with mpiexec.hydra
//	openmpi   the same built with mpicc.openmpi, run with mpirun.openmpi
//
// Every job checks its result first: after one exchange each rank's ghost
// cells must hold its neighbours' edges. A contender's figure is the
// slowest rank's time per exchange in µs over ITERS exchanges (a tenth
// more untimed first); each repetition runs one weft job (both weft
// contenders, alternating by size) and one job per MPI in an order rotated
// between repetitions; the table gives medians over repetitions and the
// median per-repetition ratio of neighbor to the best MPI.
//
// Usage (from the repository root):
//
//	go run ./test/bench/halo [-np 4] [-sizes 64,256,1024] [-reps 5] [-json]
//
// With -json it prints benchrec.Record lines on stdout (tool halo, area
// collectives, case halo2d-npNP, size the block's edge N, bytes the bytes
// one rank sends per exchange): per size one record per contender (metric
// the contender, value µs) and one of neighbor with the best MPI (metric
// neighbor-vs-mpi).
package main

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/test/bench/internal/mpijob"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

//go:embed mpi/halo.c
var mpiSource []byte

// weftCols are the contenders the weft job measures.
var weftCols = []string{"neighbor", "p2p"}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "halo:", err)
		os.Exit(sidebyside.ExitCode(err))
	}
}

// config is the parsed command line of the driver.
type config struct {
	np       int
	sizes    []int // block edges
	iters    int   // exchanges at the smallest size
	minIters int
	reps     int
	refs     []string
	fabrun   string
	timeout  time.Duration
	jsonOut  bool
}

func run(args []string, stdout, stderr io.Writer) error {
	cli := sidebyside.NewCLI("halo", "internal: weft, a rank of the weft job (arguments N:ITERS...)", 5*time.Minute, stderr)
	np := cli.Int("np", 4, "ranks (one node)")
	sizes := cli.String("sizes", "64,256,1024", "block edges N (an N×N block of float64 per rank)")
	iters := cli.Int("iters", 4000, "exchanges at N = 64 (scaled down with the bytes above)")
	minIters := cli.Int("miniters", 50, "exchanges per size at least")
	refs := cli.String("ref", "mpich,openmpi", "MPI implementations to run: mpich, openmpi")
	if err := cli.Parse(args); err != nil {
		return err
	}
	if cli.Role != "" {
		if cli.Role != "weft" {
			return fmt.Errorf("%w: -role %q: want weft", sidebyside.ErrUsage, cli.Role)
		}
		return rankMain(cli.Args(), stdout)
	}
	var cfg *config
	if err := cli.Check(func() (err error) {
		cfg, err = parseConfig(*np, *sizes, *refs, cli.Reps, *iters, *minIters)
		return err
	}); err != nil {
		return err
	}
	cfg.fabrun, cfg.timeout, cfg.jsonOut = cli.Fabrun, cli.Timeout, cli.JSON
	return drive(context.Background(), cfg, stdout, stderr)
}

// parseConfig checks the driver's flags.
func parseConfig(np int, sizes, refs string, reps, iters, minIters int) (*config, error) {
	cfg := &config{np: np, reps: reps, iters: iters, minIters: minIters}
	switch {
	case np < 1 || np > 64:
		return nil, fmt.Errorf("-np %d: want 1 to 64", np)
	case reps < 1:
		return nil, fmt.Errorf("-reps %d: want ≥ 1", reps)
	case iters < 1 || minIters < 1:
		return nil, fmt.Errorf("-iters %d -miniters %d: want ≥ 1", iters, minIters)
	}
	for _, f := range sidebyside.List(sizes) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 8192 {
			return nil, fmt.Errorf("-sizes: bad block edge %q (want 1 to 8192)", f)
		}
		if !slices.Contains(cfg.sizes, n) {
			cfg.sizes = append(cfg.sizes, n)
		}
	}
	if len(cfg.sizes) == 0 {
		return nil, fmt.Errorf("-sizes: none")
	}
	slices.Sort(cfg.sizes)
	for _, r := range sidebyside.List(refs) {
		if !slices.Contains(mpijob.Names, r) {
			return nil, fmt.Errorf("-ref %q: want %s", r, strings.Join(mpijob.Names, " or "))
		}
		if !slices.Contains(cfg.refs, r) {
			cfg.refs = append(cfg.refs, r)
		}
	}
	return cfg, nil
}

// itersFor is the number of timed exchanges of blocks of edge n: the
// bytes one rank sends are 4·8·n.
func (cfg *config) itersFor(n int) int {
	return sidebyside.ItersFor(cfg.iters, cfg.minIters, int64(32*n))
}

// spec is the sizes and iteration counts the jobs take: N:ITERS,...
func (cfg *config) spec() string {
	var parts []string
	for _, n := range cfg.sizes {
		parts = append(parts, fmt.Sprintf("%d:%d", n, cfg.itersFor(n)))
	}
	return strings.Join(parts, ",")
}

// job is one contender's job of a repetition.
type job struct {
	name string
	argv []string
	weft bool
}

// drive sets the jobs up, runs the repetitions and reports.
func drive(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "weft-halo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	w, err := mpijob.NewWeft(ctx, cfg.fabrun, tmp, "shm", cfg.timeout)
	if err != nil {
		return err
	}
	jobs := []*job{{name: "weft", weft: true, argv: append(w.Launch(cfg.np, nil), "-role", "weft", cfg.spec())}}
	for _, p := range mpijob.BuildAll(ctx, cfg.refs, mpiSource, tmp, "halo", stderr) {
		jobs = append(jobs, &job{name: p.Name, argv: append(p.Launch(cfg.np), p.Path, cfg.spec())})
	}
	res := sidebyside.NewFigures[[2]string](cfg.reps)
	var mpis []string
	for _, j := range jobs[1:] {
		mpis = append(mpis, j.name)
	}
	for rep := range cfg.reps {
		for _, j := range mpijob.Rotate(jobs, rep) {
			out, err := mpijob.Run(ctx, cfg.timeout, j.argv)
			if err != nil {
				return fmt.Errorf("rep %d, %s: %w", rep+1, j.name, err)
			}
			got, err := parseOutput(out, cfg.sizes)
			if err != nil {
				return fmt.Errorf("rep %d, %s: %w", rep+1, j.name, err)
			}
			line := fmt.Sprintf("rep %d %s:", rep+1, j.name)
			for k, us := range got {
				col := k[0]
				if !j.weft {
					col = j.name
				}
				res.Add([2]string{col, k[1]}, rep, us)
				line += fmt.Sprintf(" %s N=%s %.2f us,", col, k[1], us)
			}
			fmt.Fprintln(stderr, strings.TrimSuffix(line, ","))
		}
	}
	rp := &report{cfg: cfg, res: res, mpis: mpis}
	return sidebyside.Output(cfg.jsonOut, stdout, stderr, rp.print, rp.records)
}

// parseOutput reads a job's "RESULT CONTENDER N SECONDS" lines (rank 0's)
// and its "CHECK ok" line; every size must have a result.
func parseOutput(out []byte, sizes []int) (map[[2]string]float64, error) {
	got := map[[2]string]float64{}
	checked := false
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "CHECK" && f[1] == "ok" {
			checked = true
		}
		if len(f) != 4 || f[0] != "RESULT" {
			continue
		}
		s, err := strconv.ParseFloat(f[3], 64)
		if err != nil || s <= 0 || math.IsInf(s, 0) {
			return nil, fmt.Errorf("bad line %q", l)
		}
		got[[2]string{f[1], f[2]}] = s * 1e6
	}
	if !checked {
		return nil, fmt.Errorf("no CHECK ok line (the exchange's result was not checked):\n%s", out)
	}
	for _, n := range sizes {
		found := false
		for k := range got {
			if k[1] == strconv.Itoa(n) {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no result for N=%d:\n%s", n, out)
		}
	}
	return got, nil
}

// report prints the table and the records.
type report struct {
	cfg  *config
	res  *sidebyside.Figures[[2]string]
	mpis []string
}

func (rp *report) cols() []string { return append(slices.Clone(weftCols), rp.mpis...) }

// vsMPI is neighbor ÷ the best MPI per repetition, for size n.
func (rp *report) vsMPI(n string) []float64 {
	var keys [][2]string
	for _, m := range rp.mpis {
		keys = append(keys, [2]string{m, n})
	}
	return sidebyside.Ratios(rp.res.Series([2]string{"neighbor", n}), rp.res.Best(keys, true))
}

func (rp *report) print(w io.Writer) {
	fmt.Fprintf(w, "halo exchange, %d ranks on a grid, N×N float64 blocks: µs per exchange (slowest rank), medians of %d repetitions\n", rp.cfg.np, rp.cfg.reps)
	fmt.Fprintf(w, "%6s %10s", "N", "bytes")
	for _, c := range rp.cols() {
		fmt.Fprintf(w, " %10s", c)
	}
	if len(rp.mpis) > 0 {
		fmt.Fprintf(w, " %14s", "neighbor/MPI")
	}
	fmt.Fprintln(w)
	for _, n := range rp.cfg.sizes {
		k := strconv.Itoa(n)
		fmt.Fprintf(w, "%6d %10d", n, 32*n)
		for _, c := range rp.cols() {
			fmt.Fprintf(w, " %10.2f", sidebyside.Median(rp.res.Series([2]string{c, k})))
		}
		if len(rp.mpis) > 0 {
			fmt.Fprintf(w, " %14.2f", sidebyside.Median(rp.vsMPI(k)))
		}
		fmt.Fprintln(w)
	}
}

func (rp *report) records() []benchrec.Record {
	var rs []benchrec.Record
	for _, n := range rp.cfg.sizes {
		k := strconv.Itoa(n)
		base := benchrec.Record{Tool: "halo", Area: "collectives", Case: fmt.Sprintf("halo2d-np%d", rp.cfg.np), Size: k,
			Bytes: int64(32 * n), Unit: "us", Stat: "median"}
		for _, c := range rp.cols() {
			s := rp.res.Series([2]string{c, k})
			if sidebyside.Count(s) == 0 {
				continue
			}
			r := base
			r.Metric, r.Value, r.Reps = c, sidebyside.Median(s), sidebyside.Count(s)
			rs = append(rs, r)
		}
		if len(rp.mpis) > 0 {
			nb := rp.res.Series([2]string{"neighbor", k})
			var keys [][2]string
			for _, m := range rp.mpis {
				keys = append(keys, [2]string{m, k})
			}
			best := rp.res.Best(keys, true)
			if sidebyside.Count(nb) > 0 && sidebyside.Count(best) > 0 {
				r := base
				r.Metric, r.Value, r.Reps = "neighbor-vs-mpi", sidebyside.Median(nb), sidebyside.Count(nb)
				r.Ref, r.RefValue, r.Ratio = "best MPI", sidebyside.Median(best), benchrec.Finite(sidebyside.Median(rp.vsMPI(k)))
				rs = append(rs, r)
			}
		}
	}
	return rs
}
