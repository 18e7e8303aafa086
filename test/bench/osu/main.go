// Command osu measures weft's collectives (package collectives) with the
// loops of the OSU micro-benchmarks (osu_barrier, osu_bcast, osu_reduce,
// osu_allreduce, osu_allgather, osu_alltoall, and on request the
// nonblocking osu_ibarrier ... osu_ialltoall as started and waited for)
// and prints their output format, next to MPICH and Open MPI running the same loops, side by side
// in one run on this node:
//
//	weft     np processes of a fabrun job, one rank each (the world's
//	         ranks on endpoint handles, CreateEndpoints(1)): the
//	         hierarchy's node level combines them through a node
//	         segment (the algorithms themselves run only among nodes)
//	weft-flat the same processes with the hierarchy off (WEFT_TUNE
//	         collhier=off): the flat algorithms over weft's node
//	         transport; only with -weft naming flat
//	weft-ep  one process whose np endpoint handles are the ranks, one
//	         goroutine each: the hierarchy combines them through the
//	         process's memory
//	mpich    mpi/osu.c built with mpicc.mpich, run with mpiexec.hydra
//	openmpi  the same built with mpicc.openmpi, run with mpirun.openmpi
//	         (left out, with a note, where it is not installed)
//
// Every contender runs OSU's loop: per collective and size, a tenth of
// the calls untimed, then ITERS calls each timed alone and followed by an
// untimed barrier (none in the barrier test); a rank's latency is its
// mean, the figure the mean over the ranks (OSU's "Avg Latency"). OSU
// never rewrites its buffers, so a peer that copies from a sender's
// buffer reads lines no core has modified; with -touch every rank writes
// its send buffer before each call (untimed, then a barrier), as a
// program sends what it has just computed (OSU_TOUCH=1 in the ranks'
// environment, read by both the weft ranks and mpi/osu.c).
// Reductions sum float32s (size/4, as OSU's MPI_FLOAT); Bcast and Reduce
// are rooted at rank 0 (at the last rank as bcast:last, reduce:last);
// Allgather and Alltoall move size bytes per rank and block. Sizes above
// 8 KiB run a tenth of the calls.
//
// Each repetition runs one job per contender and rank count, the
// contenders in an order rotated from one repetition to the next; the
// OSU-format blocks give each contender's median over the repetitions,
// and the summary gives weft ÷ the faster MPI per cell as the median of
// the per-repetition ratios, and the targets:
//
//	latency ≤ 1.0× the faster MPI on the geometric mean of sizes ≤ 1 KiB,
//	never above 1.25× on a cell; bandwidth ≥ 1.0× (time ≤ 1.0×) at
//	≥ 1 MiB; with 4 endpoints of one process an 8-byte Allreduce ≥ 5×
//	faster than 4 MPI processes.
//
// (Package test/bench/internal/osutargets holds these definitions; the
// dashboard derives the same figures from the -json records.)
//
// Usage (from the repository root):
//
//	go run ./test/bench/osu [-np 2,4] [-reps 3] [-json]
//	go run ./test/bench/osu -tune FILE [-np 2,4] [-sizes ...] [-weft ep] [-tune-iters 20]
//
// With -tune it benchmarks nothing against MPI: for each rank count it
// runs collectives.Tune in a weft job (processes, or with -weft ep the
// handles of one process), which times every algorithm of each
// collective with a choice by size at each size, and writes the table of
// the fastest per size to FILE in the format WEFT_COLL_TABLE reads,
// printing each measurement next to what the default thresholds pick
// (progress on stderr through go-hclog).
//
// With -json it prints benchrec.Record lines on stdout (tool osu, area
// collectives, case <contender>-np<n>-<collective>, size the bytes,
// metric lat in us; weft's carry ref "best MPI", its median and the
// median ratio) and the tables on stderr.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "osu:", err)
		os.Exit(sidebyside.ExitCode(err))
	}
}

// config is the parsed command line of the driver.
type config struct {
	colls   []string
	sizes   []int
	nps     []int
	weft    []string // procs, ep
	refs    []string // mpich, openmpi
	reps    int
	iters   int
	fabrun  string
	timeout time.Duration
	jsonOut bool
}

func run(args []string, stdout, stderr io.Writer) error {
	cli := sidebyside.NewCLI("osu", "internal: rank, a process of the weft job", 2*time.Minute, stderr)
	colls := cli.String("colls", strings.Join(collNames, ","), "collectives: barrier, bcast, reduce, allreduce, allgather, alltoall; the nonblocking forms (started, then waited for) on request: ibarrier, ibcast, ireduce, iallreduce, iallgather, ialltoall; a rooted one with :last (bcast:last ...) is rooted at the last rank instead of 0")
	sizes := cli.String("sizes", "8,64,512,1k,8k,64k,1m", "message sizes in bytes (k, m suffixes)")
	nps := cli.String("np", "2,4", "rank counts")
	weft := cli.String("weft", "procs,ep", "weft columns: procs (a process per rank), ep (one process, a handle per rank), flat (procs with the hierarchy off), hybrid (np/2 processes of two handles each; even -np only)")
	refs := cli.String("ref", "mpich,openmpi", "MPI implementations to run: mpich, openmpi")
	iters := cli.Int("iters", 1000, "timed calls per size up to 8 KiB (a tenth above, at least 10)")
	tune := cli.String("tune", "", "tuning run: time every algorithm of the collectives with a choice by size, for each -np, and write the selection table to this file (for WEFT_COLL_TABLE) instead of benchmarking")
	tuneIters := cli.Int("tune-iters", 20, "tuning run: timed calls per algorithm and size (a quarter above 64 KiB)")
	touch := cli.Bool("touch", false, "every rank writes its send buffer before each call (untimed, then a barrier), as a program sends what it has just computed; OSU's loop never rewrites it")
	if err := cli.Parse(args); err != nil {
		return err
	}
	switch cli.Role {
	case "":
	case "rank":
		return rankMain(cli.Args(), stdout)
	case "tune":
		return tuneMain(cli.Args(), stdout)
	default:
		return fmt.Errorf("%w: -role %q: want rank or tune", sidebyside.ErrUsage, cli.Role)
	}
	var cfg *config
	err := cli.Check(func() (err error) {
		cfg, err = parseConfig(*colls, *sizes, *nps, *weft, *refs, cli.Reps, *iters)
		return err
	})
	if err != nil {
		return err
	}
	cfg.fabrun, cfg.timeout, cfg.jsonOut = cli.Fabrun, cli.Timeout, cli.JSON
	if *touch {
		// The jobs' ranks inherit it: weft's through fabrun, the MPIs'
		// through their launchers.
		if err := os.Setenv(envTouch, "1"); err != nil {
			return err
		}
	}
	if *tune != "" {
		if *tuneIters < 1 {
			return fmt.Errorf("%w: -tune-iters %d: want ≥ 1", sidebyside.ErrUsage, *tuneIters)
		}
		return tuneDrive(context.Background(), cfg, *tune, *tuneIters, stdout, stderr)
	}
	return drive(context.Background(), cfg, stdout, stderr)
}

// parseConfig checks the driver's flags.
func parseConfig(colls, sizes, nps, weft, refs string, reps, iters int) (*config, error) {
	cfg := &config{reps: reps, iters: iters}
	for _, k := range sidebyside.List(colls) {
		if !knownColl(k) {
			return nil, fmt.Errorf("-colls %q: want %s", k, strings.Join(collNames, ", "))
		}
		cfg.colls = appendUniq(cfg.colls, k)
	}
	ss, err := sidebyside.Sizes(sizes, 64<<20)
	if err != nil {
		return nil, err
	}
	for _, n := range ss {
		cfg.sizes = appendUniq(cfg.sizes, n)
	}
	for _, f := range sidebyside.List(nps) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 2 || n > 64 {
			return nil, fmt.Errorf("-np %q: want 2 to 64 ranks", f)
		}
		cfg.nps = appendUniq(cfg.nps, n)
	}
	for _, w := range sidebyside.List(weft) {
		if w != "procs" && w != "ep" && w != "flat" && w != "hybrid" {
			return nil, fmt.Errorf("-weft %q: want procs, ep, flat or hybrid", w)
		}
		cfg.weft = appendUniq(cfg.weft, w)
	}
	if slices.Contains(cfg.weft, "hybrid") {
		for _, n := range cfg.nps {
			if n%2 != 0 {
				return nil, fmt.Errorf("-weft hybrid: -np %d is odd (processes of two handles)", n)
			}
		}
	}
	for _, r := range sidebyside.List(refs) {
		if r != "mpich" && r != "openmpi" {
			return nil, fmt.Errorf("-ref %q: want mpich or openmpi", r)
		}
		cfg.refs = appendUniq(cfg.refs, r)
	}
	switch {
	case len(cfg.colls) == 0:
		return nil, fmt.Errorf("-colls: none")
	case len(cfg.sizes) == 0:
		return nil, fmt.Errorf("-sizes: none")
	case len(cfg.nps) == 0:
		return nil, fmt.Errorf("-np: none")
	case len(cfg.weft)+len(cfg.refs) == 0:
		return nil, fmt.Errorf("nothing to run: -weft and -ref are both empty")
	case reps < 1:
		return nil, fmt.Errorf("-reps %d: want ≥ 1", reps)
	case iters < 1:
		return nil, fmt.Errorf("-iters %d: want ≥ 1", iters)
	}
	return cfg, nil
}

func appendUniq[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
