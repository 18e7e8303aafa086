// Command partitioned compares weft's partitioned messages
// (endpoint.Comm.PsendInit, PrecvInit, Pready) with MPICH's
// MPI_Psend_init, MPI_Precv_init and MPI_Pready, side by side in one run
// on one node. A round: the sender starts its partitioned send, marks its
// partitions ready one after the other and waits; the receiver starts its
// partitioned receive and waits, then answers with a zero-byte message.
// The "range" rounds mark all partitions with one call (PreadyRange,
// MPI_Pready_range); the same bytes sent as one message (Send/Recv, then
// the answer) are the "whole" rows, the cost of the partitioning apart.
// Open MPI joins when its build has partitioned communication (5.0 on);
// Debian 12's 4.1 has none and is left out with a note.
//
// Usage (from the repository root):
//
//	go run ./test/bench/partitioned -reps 5 [-sizes 64k,1m] [-parts 8,64] [-json]
//
// It prints, per size and partition count, µs a round for weft and each
// MPI (partitioned and whole) and weft ÷ the best MPI's partitioned round,
// the median of the ratios taken within each repetition. With -json the
// records (tool partitioned, area p2p; case weft-part-P, weft-range-P,
// weft-whole and the same for each MPI; metric round, µs) go to stdout,
// the tables to stderr.
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/test/bench/internal/mpijob"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

//go:embed mpi/partitioned.c
var mpiSrc []byte

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "partitioned:", err)
		os.Exit(sidebyside.ExitCode(err))
	}
}

type config struct {
	sizes, parts []int
	refs         []string
	reps, iters  int
	fabrun       string
	timeout      time.Duration
	jsonOut      bool
}

func run(args []string, stdout, stderr io.Writer) error {
	cli := sidebyside.NewCLI("partitioned", "internal: rank, a rank of the weft job", 2*time.Minute, stderr)
	sizes := cli.String("sizes", "64k,1m", "message sizes (k, m suffixes), each a multiple of every partition count")
	parts := cli.String("parts", "8,64", "partition counts")
	refs := cli.String("ref", "mpich,openmpi", "MPI implementations to run")
	iters := cli.Int("iters", 2000, "timed rounds at ≤ 4 KiB (scaled down by size above, at least 100); the warm-up is a tenth")
	if err := cli.Parse(args); err != nil {
		return err
	}
	if cli.Role != "" {
		return rankMain(cli.Role, cli.Args(), stdout)
	}
	cfg := &config{reps: cli.Reps, iters: *iters, refs: sidebyside.List(*refs), fabrun: cli.Fabrun, timeout: cli.Timeout, jsonOut: cli.JSON}
	err := cli.Check(func() (err error) {
		if cfg.sizes, err = sidebyside.Sizes(*sizes, 1<<30); err != nil {
			return err
		}
		if cfg.parts, err = sidebyside.Sizes(*parts, 4096); err != nil {
			return err
		}
		for _, s := range cfg.sizes {
			for _, p := range cfg.parts {
				if p < 1 || s%p != 0 {
					return fmt.Errorf("-sizes %d is not a multiple of -parts %d", s, p)
				}
			}
		}
		for _, r := range cfg.refs {
			if !slices.Contains(mpijob.Names, r) {
				return fmt.Errorf("-ref %q: want one of %v", r, mpijob.Names)
			}
		}
		if cfg.reps < 1 || cfg.iters < 1 || len(cfg.sizes) == 0 || len(cfg.parts) == 0 {
			return errors.New("want -reps, -iters ≥ 1 and some -sizes and -parts")
		}
		return nil
	})
	if err != nil {
		return err
	}
	return drive(context.Background(), cfg, stdout, stderr)
}

// A contender is weft or an MPI: the argv that starts its 2 ranks.
type contender struct {
	name string
	argv []string
}

// cell is one figure: a contender's round of size bytes, by mode: part
// (parts partitions marked one by one), range (all marked at once) or
// whole (one message; parts 1).
type cell struct {
	name, mode  string
	size, parts int
}

// modes are the rounds each job measures, partitioned ones first.
var modes = []string{"part", "range", "whole"}

func drive(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "weft-partitioned-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	w, err := mpijob.NewWeft(ctx, cfg.fabrun, tmp, "shm", cfg.timeout)
	if err != nil {
		return err
	}
	cs := []contender{{"weft", append(w.Launch(2, nil), "-role", "rank")}}
	var mpis []string
	for _, p := range mpijob.BuildAll(ctx, cfg.refs, mpiSrc, tmp, "partitioned", stderr) {
		if !hasPartitioned(ctx, cfg, p) {
			fmt.Fprintf(stderr, "partitioned: %s left out: its library has no MPI_Psend_init\n", p.Name)
			continue
		}
		cs = append(cs, contender{p.Name, append(p.Launch(2), p.Path)})
		mpis = append(mpis, p.Name)
	}
	figs := sidebyside.NewFigures[cell](cfg.reps)
	for rep := range cfg.reps {
		for _, parts := range cfg.parts {
			for _, c := range mpijob.Rotate(cs, rep) {
				n := sidebyside.ItersFor(cfg.iters, min(cfg.iters, 100), int64(slices.Max(cfg.sizes)))
				argv := append(append([]string{}, c.argv...), strconv.Itoa(n), strconv.Itoa(sidebyside.WarmupFor(n)), strconv.Itoa(parts))
				for _, s := range cfg.sizes {
					argv = append(argv, strconv.Itoa(s))
				}
				out, err := mpijob.Run(ctx, cfg.timeout, argv)
				if err != nil {
					return fmt.Errorf("rep %d, %s, %d partitions: %w", rep+1, c.name, parts, err)
				}
				got, err := parseResults(out)
				if err != nil {
					return fmt.Errorf("rep %d, %s: %w", rep+1, c.name, err)
				}
				line := fmt.Sprintf("rep %d %s %d partitions:", rep+1, c.name, parts)
				for _, s := range cfg.sizes {
					line += fmt.Sprintf(" %d B", s)
					for _, m := range modes {
						k := cell{"", m, s, parts}
						if m == "whole" {
							k.parts = 1
						}
						v, ok := got[k]
						if !ok {
							return fmt.Errorf("rep %d, %s: no %s result for %d B in %d partitions in %q", rep+1, c.name, m, s, parts, out)
						}
						if m == "whole" && parts != cfg.parts[0] {
							continue // the whole message: once a repetition
						}
						k.name = c.name
						figs.Add(k, rep, v)
						line += fmt.Sprintf(" %s %.2f us", m, v)
					}
				}
				fmt.Fprintln(stderr, line)
			}
		}
	}
	rp := report{cfg: cfg, figs: figs, mpis: mpis}
	return sidebyside.Output(cfg.jsonOut, stdout, stderr, rp.print, rp.records)
}

// hasPartitioned reports whether p's library runs a partitioned round:
// one small job (a library without MPI_Psend_init fails to build or run).
func hasPartitioned(ctx context.Context, cfg *config, p mpijob.Program) bool {
	_, err := mpijob.Run(ctx, cfg.timeout, append(p.Launch(2), p.Path, "1", "0", "1", "8"))
	return err == nil
}

var resultLine = regexp.MustCompile(`(?m)^RESULT (part|range|whole) (\d+) (\d+) (\S+)\s*$`)

// parseResults reads "RESULT part|range|whole BYTES PARTS MICROSECONDS"
// lines.
func parseResults(out []byte) (map[cell]float64, error) {
	got := map[cell]float64{}
	for _, m := range resultLine.FindAllStringSubmatch(string(out), -1) {
		s, _ := strconv.Atoi(m[2])
		p, _ := strconv.Atoi(m[3])
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("bad result line %q", m[0])
		}
		got[cell{"", m[1], s, p}] = v
	}
	return got, nil
}

// report prints and records the medians.
type report struct {
	cfg  *config
	figs *sidebyside.Figures[cell]
	mpis []string
}

// bestMPI is, per repetition, the faster MPI's round of mode.
func (rp *report) bestMPI(mode string, s, p int) []float64 {
	var keys []cell
	for _, m := range rp.mpis {
		keys = append(keys, cell{m, mode, s, p})
	}
	return rp.figs.Best(keys, true)
}

// med is k's median as a table figure.
func (rp *report) med(k cell) string { return sidebyside.Fig(sidebyside.Median(rp.figs.Series(k))) }

func (rp *report) print(w io.Writer) {
	fmt.Fprintf(w, "Partitioned rounds, µs (median of %d runs): partitions marked one by one, all at once (range), and the bytes as one message (whole); weft ÷ the faster MPI, median of the per-run ratios\n\n", rp.cfg.reps)
	fmt.Fprintf(w, "%-9s %6s %9s %9s", "size", "parts", "weft", "range")
	for _, m := range rp.mpis {
		fmt.Fprintf(w, " %9s %9s", m, "range")
	}
	fmt.Fprintf(w, " %7s %7s\n", "weft÷", "range÷")
	for _, s := range rp.cfg.sizes {
		for _, p := range rp.cfg.parts {
			fmt.Fprintf(w, "%-9d %6d %9s %9s", s, p, rp.med(cell{"weft", "part", s, p}), rp.med(cell{"weft", "range", s, p}))
			for _, m := range rp.mpis {
				fmt.Fprintf(w, " %9s %9s", rp.med(cell{m, "part", s, p}), rp.med(cell{m, "range", s, p}))
			}
			for _, mode := range []string{"part", "range"} {
				fmt.Fprintf(w, " %7s", sidebyside.RatioFig(sidebyside.Median(sidebyside.Ratios(rp.figs.Series(cell{"weft", mode, s, p}), rp.bestMPI(mode, s, p)))))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%-9d %6s %9s %9s", s, "whole", rp.med(cell{"weft", "whole", s, 1}), "")
		for _, m := range rp.mpis {
			fmt.Fprintf(w, " %9s %9s", rp.med(cell{m, "whole", s, 1}), "")
		}
		fmt.Fprintln(w)
	}
}

func (rp *report) records() []benchrec.Record {
	var out []benchrec.Record
	var keys []cell
	for _, s := range rp.cfg.sizes {
		for _, name := range append([]string{"weft"}, rp.mpis...) {
			for _, p := range rp.cfg.parts {
				keys = append(keys, cell{name, "part", s, p}, cell{name, "range", s, p})
			}
			keys = append(keys, cell{name, "whole", s, 1})
		}
	}
	for _, k := range keys {
		v := rp.figs.Series(k)
		if sidebyside.Count(v) == 0 {
			continue
		}
		kind := k.mode
		if k.mode != "whole" {
			kind += "-" + strconv.Itoa(k.parts)
		}
		r := benchrec.Record{Tool: "partitioned", Area: "p2p", Case: k.name + "-" + kind, Size: strconv.Itoa(k.size), Metric: "round",
			Value: sidebyside.Median(v), Unit: "us", Reps: rp.cfg.reps, Stat: "median"}
		if ref := rp.bestMPI(k.mode, k.size, k.parts); k.name == "weft" && sidebyside.Count(ref) > 0 {
			r.Ref, r.RefValue = "best MPI", benchrec.Finite(sidebyside.Median(ref))
			r.Ratio = benchrec.Finite(sidebyside.Median(sidebyside.Ratios(v, ref)))
		}
		out = append(out, r)
	}
	return out
}
