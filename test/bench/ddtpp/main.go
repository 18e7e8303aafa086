// Command ddtpp measures typed messages on one node: a ping-pong of every
// DDTBench layout of test/bench/internal/ddtcases (WRF, MILC, NAS LU and
// MG, FFT2, SPECFEM3D, LAMMPS; sizes s, m, l), each side sending COUNT
// elements of the case's datatype and receiving them back, with seven
// contenders side by side in one run (issue 20):
//
//	typed    weft: endpoint's Comm.SendTyped and RecvTyped of the case's
//	         ddt type on both sides
//	manual   weft: the case's hand-written pack loop, a contiguous Send of
//	         the packed bytes, a contiguous Recv and the hand-written
//	         unpack loop (ddtbench's "manual" engine)
//	contig   weft: contiguous Send and Recv of the same number of bytes
//	mpich    mpi/ddtpp.c built with mpicc.mpich: MPI_Send and MPI_Recv of
//	         the same layout as an MPI datatype, run with mpiexec.hydra
//	openmpi  the same built with mpicc.openmpi, run with mpirun.openmpi
//	         --mca pml ob1 --mca btl self,vader (sm from 5.0)
//	mpich-contig, openmpi-contig
//	         the same MPI jobs, after the typed ping-pong: MPI_Send and
//	         MPI_Recv of the same number of bytes as contiguous MPI_BYTEs
//
// The contiguous sends (contig and the MPIs' -contig) are the floor: the
// fastest of them in a repetition is what no typed send of the layout can
// beat, however good its datatype engine, since it moves the same bytes
// with nothing to pack. The weft job also times its typed contender's
// passes alone, both ranks at once and with no message (pack and unpack:
// each rank's mean, the slower rank's figure): a typed send that packs
// overlaps at best the sender's pack with the receiver's unpack, so the
// larger of the two (the packing floor) is what no typed send of weft's
// datatype engine can beat, and the larger of the floor and the packing
// floor is the lowest a typed cell can be.
//
// The MPI datatype of a case is not written by hand: the driver writes a
// recipe (recipe.go) of the constructor calls that built the ddt type,
// read back with ddt.Type.Contents, and the MPI program makes the same
// calls with the MPI constructors. Every job first checks the layout: rank
// 0 sends the case's typed buffer holding a known pattern and rank 1
// hashes the bytes it receives (the packed stream), then rank 1 sends a
// known stream that rank 0 receives into a zeroed typed buffer and hashes
// (the unpacked layout); the driver compares both hashes with those of
// ddt's own Pack and Unpack of the case, and refuses a run in which any
// contender disagrees. After the ping-pong, rank 0 checks that what came
// back packs to what it sent.
//
// Each repetition runs one weft job and one job per MPI, in an order
// rotated from one repetition to the next, each over every case and size
// with the same iteration counts (-iters round trips up to 4 KiB, scaled
// down by size above, at least -miniters; a tenth more untimed first).
// Within the weft job the three weft contenders alternate: each case's
// round trips are split into -rounds rounds, and every round runs a share
// of each contender in a rotated order. The figure of a contender is the
// half round trip in µs; the ratios typed ÷ manual, typed ÷ contig and
// typed ÷ best MPI (the faster of MPICH and Open MPI in the same
// repetition), and floor ÷ best MPI (the floor being the fastest of
// contig, mpich-contig and openmpi-contig in the same repetition), are
// taken within each repetition, and the tables show their medians over the
// repetitions. The targets of issue 20 are summarised at the end: typed
// never slower than manual (worst cell ≤ 1.0), typed within 1.15× of
// contig on the geometric mean of the cells of at least 64 KiB, and typed
// at least twice as fast as the best MPI on the geometric mean of all
// cells (≤ 0.5). Under them, without a target, the geometric mean over all
// cells of floor ÷ best MPI, and the last two targets' geometric means
// with the lowest in place of typed: what the figures could be at best
// with this datatype engine, so that a target whose lowest figure is
// beyond it is out of its reach.
//
// Usage (from the repository root):
//
//	go run ./test/bench/ddtpp [-reps 5] [-cases REGEXP] [-sizes s,m,l] [-json]
//
// With -json it prints benchrec.Record lines on stdout (tool ddtpp, area
// ddtpp, case the layout, size its label, bytes the message size) and the
// tables on stderr: per cell one record per contender (metric typed,
// manual, contig, mpich, openmpi, mpich-contig, openmpi-contig; value the
// median half round trip in µs) and per pass (pack, unpack; µs), three of
// typed with a reference (metric typed-vs-manual, typed-vs-contig,
// typed-vs-mpi; ratio the median per-repetition ratio), one of the
// packing floor with contig (packfloor-vs-contig) and, when an MPI ran,
// one of the floor with the
// best MPI (metric floor-vs-mpi; value the median floor, ref_value the
// median best MPI, ratio the median per-repetition floor ÷ best MPI).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/weft-hpc/weft/test/bench/internal/ddtcases"
	"github.com/weft-hpc/weft/test/bench/internal/mpijob"
	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ddtpp:", err)
		os.Exit(sidebyside.ExitCode(err))
	}
}

// config is the parsed command line of the driver.
type config struct {
	cases     []*ddtcases.Case
	reps      int
	iters     int // round trips up to 4 KiB
	minIters  int
	rounds    int
	refs      []string // mpich, openmpi
	transport string   // WEFT_NODE_TRANSPORT of the weft job
	provider  string
	fabrun    string
	timeout   time.Duration
	jsonOut   bool
}

func run(args []string, stdout, stderr io.Writer) error {
	cli := sidebyside.NewCLI("ddtpp", "internal: weft, a rank of the weft job (arguments RECIPE ROUNDS)", 5*time.Minute, stderr)
	cases := cli.String("cases", "", "regexp selecting layouts by name (empty: all)")
	sizes := cli.String("sizes", "s,m,l", "comma-separated size labels (s, m, l)")
	iters := cli.Int("iters", 10000, "round trips per case up to 4 KiB messages (scaled down by size above); the warm-up is a tenth")
	minIters := cli.Int("miniters", 50, "round trips per case at least")
	rounds := cli.Int("rounds", 5, "rounds the weft contenders alternate in, per case")
	refs := cli.String("ref", "mpich,openmpi", "MPI implementations to run: mpich, openmpi")
	transport := cli.String("transport", "native", "WEFT_NODE_TRANSPORT of the weft job")
	provider := cli.String("provider", "shm", "libfabric provider of the weft job")
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
	err := cli.Check(func() (err error) {
		cfg, err = parseConfig(*cases, *sizes, *refs, cli.Reps, *iters, *minIters, *rounds)
		return err
	})
	if err != nil {
		return err
	}
	if *transport == "" || strings.ContainsAny(*transport, "= \t") {
		return fmt.Errorf("%w: -transport %q: not a WEFT_NODE_TRANSPORT value", sidebyside.ErrUsage, *transport)
	}
	cfg.transport, cfg.provider, cfg.fabrun, cfg.timeout, cfg.jsonOut = *transport, *provider, cli.Fabrun, cli.Timeout, cli.JSON
	return drive(context.Background(), cfg, stdout, stderr)
}

// parseConfig checks the driver's flags and builds the selected cases.
func parseConfig(cases, sizes, refs string, reps, iters, minIters, rounds int) (*config, error) {
	cfg := &config{reps: reps, iters: iters, minIters: minIters, rounds: rounds}
	switch {
	case reps < 1:
		return nil, fmt.Errorf("-reps %d: want ≥ 1", reps)
	case iters < 1 || minIters < 1:
		return nil, fmt.Errorf("-iters %d -miniters %d: want ≥ 1", iters, minIters)
	case rounds < 1 || rounds > minIters:
		return nil, fmt.Errorf("-rounds %d: want 1 to -miniters (%d)", rounds, minIters)
	}
	re, err := regexp.Compile(cases)
	if err != nil {
		return nil, fmt.Errorf("-cases: %v", err)
	}
	sz := sidebyside.List(sizes)
	for _, s := range sz {
		if !slices.Contains(ddtcases.Sizes, s) {
			return nil, fmt.Errorf("-sizes: unknown size %q (want %s)", s, strings.Join(ddtcases.Sizes, ", "))
		}
	}
	for _, n := range ddtcases.Names() {
		if !re.MatchString(n) {
			continue
		}
		for _, s := range ddtcases.Sizes { // in size order, whatever the flag's
			if !slices.Contains(sz, s) {
				continue
			}
			c, err := ddtcases.Build(n, s)
			if err != nil {
				return nil, err
			}
			cfg.cases = append(cfg.cases, c)
		}
	}
	if len(cfg.cases) == 0 {
		return nil, fmt.Errorf("no case matches -cases %q -sizes %q", cases, sizes)
	}
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
