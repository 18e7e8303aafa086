// Command p2p compares weft's point-to-point messaging (package endpoint)
// with libfabric's fi_pingpong, MPICH and Open MPI on one node, side by
// side in one run (issue 19):
//
//	pingpong  half round trip (µs) and bandwidth (size ÷ half round trip,
//	          MB/s = 10^6 B/s) of blocking send/receive, 8 B to 4 MiB, as
//	          OSU's osu_latency measures it
//	msgrate   8-byte messages per second, window 64, as OSU's osu_mbw_mr
//	          measures it: per window the sender starts 64 non-blocking
//	          sends and waits for them all, the receiver starts 64
//	          non-blocking receives, waits for them all and answers with a
//	          zero-byte acknowledgement. Cases: 1 (one sender process, one
//	          receiver process), 2 (two sender processes, two receivers:
//	          4 ranks, pairs 0→2 and 1→3, rates added) and, weft only, 2ep
//	          (two processes, each with two endpoint handles from
//	          Comm.CreateEndpoints and a goroutine per handle, pairs
//	          sending at once; compared with the MPIs' case 2); 1b and
//	          2epb, weft only, are 1 and 2ep with each window's sends
//	          started by one Comm.IsendBatch (compared with the MPIs'
//	          cases 1 and 2)
//
// Contenders, each run as separate processes of this node:
//
//	weft         this command re-executed as the ranks of a fabrun job
//	             (-role), with WEFT_NODE_TRANSPORT=native; -weft
//	             native,fabric adds a weft-fabric column
//	             (WEFT_NODE_TRANSPORT=fabric), and any other value v a
//	             weft-v column; v+thp (native+thp) runs v with the
//	             ping-pong buffers on transparent huge pages (mmap,
//	             MADV_HUGEPAGE) instead of the Go heap, column weft-thp;
//	             v:T (native:nodecopy=0) runs v with WEFT_TUNE=T (its
//	             key=value pairs separated by / instead of commas), column
//	             weft:T (an A/B of tuning knobs in one run).
//	             Ping-pong and the 1- and 2-sender rates
//	             run on a private endpoint per rank (CreateEndpoints(1)).
//	fi_pingpong  libfabric's fi_pingpong -p shm -e rdm (ping-pong only)
//	mpich        mpi/pingpong.c and mpi/msgrate.c built with mpicc.mpich,
//	             run with mpiexec.hydra -launcher fork
//	openmpi      the same built with mpicc.openmpi, run with
//	             mpirun.openmpi --oversubscribe --mca pml ob1 --mca btl
//	             self,<its shared-memory BTL: vader, or sm from 5.0 on>
//	floor...     on request (-ref), what the machine allows without a
//	             library: floor/floor.c built with cc, forking its own
//	             processes. Ping-pong: floor, one process_vm_readv of the
//	             whole message per half round trip (buffers malloc'd once);
//	             floor-thp, the same on transparent huge pages;
//	             floor-fresh, into a buffer malloc'd per message;
//	             floor-memcpy, memcpy of the message in one process.
//	             Rate (floor only, cases 1 and 2): weft's ring protocol
//	             alone, no matching or requests. Floors are columns
//	             without a ratio; they are never a reference.
//
// A contender whose programs are missing is left out with a note on
// stderr. Each repetition runs every contender once per size and rate
// case, the contenders one after the other and in a rotated order from
// one repetition to the next; all get the same iteration counts. The VM
// this runs on switches between a fast and a slow latency regime from one
// process launch to the next, so the medians of each contender apart may
// compare one regime with the other: the ratios are taken within each
// repetition (weft against the best reference of the same repetition,
// run back to back) and their median reported.
//
// Usage (from the repository root):
//
//	go run ./test/bench/p2p -reps 5 [-weft native,fabric] [-json]
//
// With -json it prints benchrec.Record lines on stdout (tool p2p, area
// p2p) and the tables on stderr: per contender, case the column name, size
// the message bytes, metric lat (us) or bw (MB/s); and case
// <column>-rate<case>, size the rate's message bytes, metric msgrate
// (msg/s). The weft columns carry ref "best MPI" (lat, msgrate; for 2ep
// "best MPI 2 senders") or "best of MPI, fi_pingpong" (bw), ref_value the
// median of the per-repetition best reference and ratio the median of the
// per-repetition ratios.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/weft-hpc/weft/test/bench/internal/sidebyside"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "p2p:", err)
		os.Exit(sidebyside.ExitCode(err))
	}
}

// config is the parsed command line of the driver.
type config struct {
	sizes    []int
	rates    []string // "1", "2", "2ep"
	reps     int
	iters    int // ping-pong iterations at ≤ 4 KiB (scaled down above)
	window   int
	windows  int
	msgSize  int
	weft     []string // WEFT_NODE_TRANSPORT values, one column each
	refs     []string // fi_pingpong, mpich, openmpi
	provider string
	fabrun   string
	fiPath   string
	timeout  time.Duration
	jsonOut  bool
}

func run(args []string, stdout, stderr io.Writer) error {
	cli := sidebyside.NewCLI("p2p", "internal: pingpong or msgrate, a rank of the weft job", 2*time.Minute, stderr)
	sizes := cli.String("sizes", "8,64,512,4k,32k,64k,256k,1m,4m", "ping-pong message sizes (k, m suffixes); empty: no ping-pong")
	rates := cli.String("rates", "1,2,2ep,1b,2epb", "message-rate cases: 1, 2 (senders), 2ep (weft: two endpoints of one process), 1b and 2epb (weft: 1 and 2ep with IsendBatch); empty: none")
	iters := cli.Int("iters", 50000, "ping-pong round trips at ≤ 4 KiB (scaled down by size above, at least 100); the warm-up is a tenth")
	window := cli.Int("window", 64, "messages per window in the rate cases")
	windows := cli.Int("windows", 2000, "timed windows per rate measurement (a tenth more untimed first)")
	msgSize := cli.Int("msgsize", 8, "message bytes in the rate cases")
	weft := cli.String("weft", "native", "WEFT_NODE_TRANSPORT values, one weft column each (native: weft, fabric: weft-fabric)")
	refs := cli.String("ref", "fi_pingpong,mpich,openmpi", "references to run: fi_pingpong, mpich, openmpi; floors (columns without a ratio): floor, floor-thp, floor-fresh, floor-memcpy")
	provider := cli.String("provider", "shm", "libfabric provider of the weft job and fi_pingpong")
	fiPath := cli.String("fi_pingpong", "fi_pingpong", "libfabric's fi_pingpong")
	if err := cli.Parse(args); err != nil {
		return err
	}
	if cli.Role != "" {
		return rankMain(cli.Role, cli.Args(), stdout)
	}
	var cfg *config
	err := cli.Check(func() (err error) {
		cfg, err = parseConfig(*sizes, *rates, *weft, *refs, cli.Reps, *iters, *window, *windows, *msgSize)
		return err
	})
	if err != nil {
		return err
	}
	cfg.provider, cfg.fabrun, cfg.fiPath, cfg.timeout, cfg.jsonOut = *provider, cli.Fabrun, *fiPath, cli.Timeout, cli.JSON
	return drive(context.Background(), cfg, stdout, stderr)
}

// parseConfig checks the driver's flags.
func parseConfig(sizes, rates, weft, refs string, reps, iters, window, windows, msgSize int) (*config, error) {
	cfg := &config{reps: reps, iters: iters, window: window, windows: windows, msgSize: msgSize}
	var err error
	if cfg.sizes, err = parseSizes(sizes); err != nil {
		return nil, err
	}
	for _, r := range sidebyside.List(rates) {
		switch r {
		case "1", "2", "2ep", "1b", "2epb":
		default:
			return nil, fmt.Errorf("-rates %q: want 1, 2, 2ep, 1b or 2epb", r)
		}
		cfg.rates = appendUniq(cfg.rates, r)
	}
	for _, w := range sidebyside.List(weft) {
		tr, _, _ := strings.Cut(w, ":")
		if strings.ContainsAny(tr, "= \t") || strings.ContainsAny(w, " \t") {
			return nil, fmt.Errorf("-weft %q: not a WEFT_NODE_TRANSPORT value", w)
		}
		cfg.weft = appendUniq(cfg.weft, w)
	}
	for _, r := range sidebyside.List(refs) {
		switch r {
		case "fi_pingpong", "mpich", "openmpi", "floor", "floor-thp", "floor-fresh", "floor-memcpy":
		default:
			return nil, fmt.Errorf("-ref %q: want fi_pingpong, mpich, openmpi, floor, floor-thp, floor-fresh or floor-memcpy", r)
		}
		cfg.refs = appendUniq(cfg.refs, r)
	}
	switch {
	case reps < 1:
		return nil, fmt.Errorf("-reps %d: want ≥ 1", reps)
	case iters < 1:
		return nil, fmt.Errorf("-iters %d: want ≥ 1", iters)
	case window < 1 || windows < 1:
		return nil, fmt.Errorf("-window %d -windows %d: want ≥ 1", window, windows)
	case msgSize < 0:
		return nil, fmt.Errorf("-msgsize %d: want ≥ 0", msgSize)
	case len(cfg.sizes) == 0 && len(cfg.rates) == 0:
		return nil, fmt.Errorf("nothing to measure: -sizes and -rates are both empty")
	case len(cfg.weft) == 0 && len(cfg.refs) == 0:
		return nil, fmt.Errorf("nothing to run: -weft and -ref are both empty")
	}
	return cfg, nil
}

func appendUniq(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// parseSizes reads -sizes: 1 B to 1 GiB, k and m suffixes.
func parseSizes(s string) ([]int, error) { return sidebyside.Sizes(s, 1<<30) }

// itersFor scales the ping-pong iterations down for messages above 4 KiB
// so that every size takes a similar time, keeping at least 100 (or base,
// when less).
func itersFor(base, size int) int { return sidebyside.ItersFor(base, min(base, 100), int64(size)) }
