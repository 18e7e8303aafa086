// Command onesided benchmarks weft's one-sided package against MPI_Put and
// libfabric's own ping-pong, side by side in one run (issue 7):
//
//	put_lat   Put + Flush of one message, µs (osu_put_latency's method)
//	put_bw    64 Puts then one Flush, MB/s (osu_put_bw's method)
//	ps_lat    half round trip of a PutSignal ping-pong, µs: rank 0 puts a
//	          message and a signal, rank 1 waits for the signal and answers
//	ps_issue  cost of one 8-byte PutSignal call, µs (direct stores only:
//	          the data and the flag are visible in the peer's memory when it
//	          returns)
//
// Tools, each run as two processes on this node and interleaved over
// -reps repetitions so that machine load hits them alike:
//
//	weft-direct   window over /dev/shm, puts and signals are stores
//	weft-shm      window through libfabric's shm provider (WEFT_ONESIDED_SHM=off)
//	weft-*-spin   the same with pure spinning waiters (WEFT_TUNE=osspin=1e9);
//	              without -spin the ranks use the library's default wait
//	              policy (or whatever WEFT_ONESIDED_* the caller exported)
//	weft-shm-waw, weft-shm-cqdata (also with -spin)
//	              weft-shm with the signal ordering forced
//	              (WEFT_ONESIDED_ORDER=waw: data and flag as two injected
//	              writes; cqdata: one write, the flag in its remote CQ
//	              data); plain weft-shm takes the library's choice (cqdata
//	              on shm)
//	base:weft-*   any weft tool with its ranks run from the binary -base
//	              names (another build of this command, e.g. of the main
//	              branch), for before/after comparisons in one run
//	fi_pingpong   libfabric's fi_pingpong -p shm -e rdm, 8 B (the reference
//	              for "through libfabric shm ≤ 1.2× fi_pingpong 8 B")
//	mpich, ompi   bin/mpi_put_{mpich,ompi} from mpi_put.c (build.sh)
//
// Usage (from the repository root):
//
//	test/bench/onesided/build.sh
//	go run ./test/bench/onesided -reps 5 -sizes 8,64,512,4k,32k,256k,1m
//
// Flags have WEFT_BENCH_<FLAG> environment equivalents.
//
// With -json the tables are replaced by one JSON object per tool, metric
// and size (the schema is benchrec.Record in record.go): case is the tool, metric
// one of the four above, value the median over the repetitions that tool
// completed (reps); the weft-shm* tools' 8-byte ps_lat also carry ref
// fi_pingpong, its median, and ratio, the median of the per-repetition
// ratios.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weft-hpc/weft/internal/benchrec"
	"github.com/weft-hpc/weft/internal/launch"
	"github.com/weft-hpc/weft/job"
	"github.com/weft-hpc/weft/onesided"
	"github.com/weft-hpc/weft/test/bench/internal/fipingpong"
)

func env(name, def string) string {
	if v := os.Getenv("WEFT_BENCH_" + name); v != "" {
		return v
	}
	return def
}

var (
	role     = flag.String("role", "", "internal: rank")
	path     = flag.String("path", "direct", "internal: direct or shm (the rank's window path)")
	sizesF   = flag.String("sizes", env("SIZES", "8,64,512,4k,32k,256k,1m"), "message sizes (k, m suffixes)")
	reps     = flag.Int("reps", atoi(env("REPS", "5")), "repetitions; medians are reported")
	iters    = flag.Int("iters", atoi(env("ITERS", "10000")), "iterations for small messages (scaled down for large)")
	fiIters  = flag.Int("fi_iters", atoi(env("FI_ITERS", "100000")), "fi_pingpong's iterations: it has no warm-up, so its first milliseconds count unless the run is long")
	tools    = flag.String("tools", env("TOOLS", "weft-direct,weft-shm,fi_pingpong,mpich,ompi"), "tools to run")
	binDir   = flag.String("bin", env("BIN", "test/bench/onesided/bin"), "where build.sh put the MPI programs")
	timeoutF = flag.Duration("timeout", 120*time.Second, "per tool run")
	verbose  = flag.Bool("v", env("VERBOSE", "") != "", "print every sample on stderr")
	jsonOut  = flag.Bool("json", env("JSON", "") == "1", "print one JSON object per result line instead of the tables")
	baseBin  = flag.String("base", env("BASE", ""), "another build of this command whose ranks the base:weft-* tools run")
)

func atoi(s string) int { v, _ := strconv.Atoi(s); return v }

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		mul := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mul, f = 1<<10, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "m"):
			mul, f = 1<<20, strings.TrimSuffix(f, "m")
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, v*mul)
	}
	return out, nil
}

func main() {
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "onesided bench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if *reps < 1 || *iters < 1 {
		fmt.Fprintf(os.Stderr, "onesided bench: -reps %d -iters %d: want ≥ 1\n", *reps, *iters)
		os.Exit(2)
	}
	sizes, err := parseSizes(*sizesF)
	if err != nil {
		fmt.Fprintln(os.Stderr, "onesided bench:", err)
		os.Exit(2)
	}
	if *role == "rank" {
		if err := rankMain(sizes); err != nil {
			fmt.Fprintln(os.Stderr, "onesided bench rank:", err)
			os.Exit(1)
		}
		return
	}
	if err := driver(sizes); err != nil {
		fmt.Fprintln(os.Stderr, "onesided bench:", err)
		os.Exit(1)
	}
}

// results[tool][metric][size] = samples
type results map[string]map[string]map[int][]float64

func (r results) add(tool, metric string, size int, v float64) {
	if r[tool] == nil {
		r[tool] = map[string]map[int][]float64{}
	}
	if r[tool][metric] == nil {
		r[tool][metric] = map[int][]float64{}
	}
	r[tool][metric][size] = append(r[tool][metric][size], v)
}

func (r results) median(tool, metric string, size int) float64 {
	s := append([]float64(nil), r[tool][metric][size]...)
	if len(s) == 0 {
		return math.NaN()
	}
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

var resultRE = regexp.MustCompile(`RESULT (\S+) (\d+) ([0-9.eE+-]+)`)

func parseResults(r results, tool string, out []byte) int {
	n := 0
	for _, m := range resultRE.FindAllSubmatch(out, -1) {
		size, _ := strconv.Atoi(string(m[2]))
		v, err := strconv.ParseFloat(string(m[3]), 64)
		if err == nil {
			r.add(tool, string(m[1]), size, v)
			n++
		}
	}
	return n
}

func driver(sizes []int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var sz []string
	for _, s := range sizes {
		sz = append(sz, strconv.Itoa(s))
	}
	res := results{}
	want := strings.Split(*tools, ",")
	for rep := 0; rep < *reps; rep++ {
		before := map[string]int{}
		for _, t := range want {
			before[t] = len(res[t]["ps_lat"][8])
		}
		for _, tool := range want {
			var out []byte
			var err error
			ctx, cancel := context.WithTimeout(context.Background(), *timeoutF)
			bin, name := self, tool
			if b, ok := strings.CutPrefix(tool, "base:"); ok {
				bin, name = *baseBin, b
				if bin == "" {
					name = "base: without -base"
				}
			}
			switch name {
			case "weft-direct", "weft-shm", "weft-direct-spin", "weft-shm-spin",
				"weft-shm-waw", "weft-shm-waw-spin", "weft-shm-cqdata", "weft-shm-cqdata-spin":
				p := strings.TrimPrefix(name, "weft-")
				var renv []string
				if strings.HasSuffix(p, "-spin") {
					// Pure spinning: the waiter never gives its core away.
					p = strings.TrimSuffix(p, "-spin")
					renv = append(renv, "WEFT_TUNE=osspin=1000000000")
				}
				for _, o := range []string{"waw", "cqdata"} {
					if strings.HasSuffix(p, "-"+o) {
						p = strings.TrimSuffix(p, "-"+o)
						renv = append(renv, "WEFT_ONESIDED_ORDER="+o)
					}
				}
				var buf bytes.Buffer
				err = launch.Run(ctx, launch.Config{NP: 2, Launcher: "local",
					Argv:     []string{bin, "-role", "rank", "-path", p, "-sizes", *sizesF, "-iters", strconv.Itoa(*iters)},
					Env:      renv,
					Provider: "shm", Stdout: &buf, Stderr: &buf, Timeout: *timeoutF})
				out = buf.Bytes()
			case "fi_pingpong":
				out, err = fiPingpong(ctx)
			case "mpich":
				prog := filepath.Join(*binDir, "mpi_put_mpich")
				if _, e := os.Stat(prog); e != nil {
					err = fmt.Errorf("%s missing: run test/bench/onesided/build.sh", prog)
					break
				}
				out, err = exec.CommandContext(ctx, "mpiexec.hydra", append([]string{"-n", "2", prog}, sz...)...).CombinedOutput()
			case "ompi":
				prog := filepath.Join(*binDir, "mpi_put_ompi")
				if _, e := os.Stat(prog); e != nil {
					err = fmt.Errorf("%s missing: run test/bench/onesided/build.sh", prog)
					break
				}
				cmd := exec.CommandContext(ctx, "mpiexec.openmpi", append([]string{"--oversubscribe", "-n", "2", prog}, sz...)...)
				cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
				out, err = cmd.CombinedOutput()
			default:
				err = fmt.Errorf("unknown tool %q", tool)
			}
			cancel()
			if err != nil {
				fmt.Fprintf(os.Stderr, "rep %d %s: %v\n%s\n", rep, tool, err, out)
				continue
			}
			if n := parseResults(res, tool, out); n == 0 {
				fmt.Fprintf(os.Stderr, "rep %d %s: no results in\n%s\n", rep, tool, out)
			} else if *verbose {
				for _, m := range resultRE.FindAll(out, -1) {
					fmt.Fprintf(os.Stderr, "rep %d %s %s\n", rep, tool, m)
				}
			}
		}
		// Pair this repetition's PutSignal ping-pong with fi_pingpong's.
		if f := res["fi_pingpong"]["ps_lat"][8]; len(f) > before["fi_pingpong"] {
			for _, t := range shmTools(want) {
				if d := res[t]["ps_lat"][8]; len(d) > before[t] {
					pairedRatios[t] = append(pairedRatios[t], d[len(d)-1]/f[len(f)-1])
				}
			}
		}
	}
	if *jsonOut {
		return benchrec.Write(os.Stdout, records(res, sizes, want))
	}
	printTable(res, sizes, want)
	for _, t := range shmTools(want) {
		if r := pairedRatios[t]; len(r) > 0 {
			sort.Float64s(r)
			fmt.Printf("%s / fi_pingpong at 8 B, per repetition (same rep, back to back): median %.2f of %d %v\n",
				t, medianOf(r), len(r), fmtRatios(r))
		}
	}
	return nil
}

// shmTools are the tools whose 8-byte ps_lat is compared with
// fi_pingpong: the weft-shm ones, from this binary or the base one.
func shmTools(tools []string) []string {
	var out []string
	for _, t := range tools {
		if strings.HasPrefix(strings.TrimPrefix(t, "base:"), "weft-shm") {
			out = append(out, t)
		}
	}
	return out
}

// pairedRatios[tool] holds, per repetition, the tool's 8-byte ps_lat over
// fi_pingpong's from the same repetition (run back to back, so a burst of
// machine load hits both).
var pairedRatios = map[string][]float64{}

func medianOf(s []float64) float64 {
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtRatios(r []float64) string {
	var b strings.Builder
	for i, v := range r {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.2f", v)
	}
	return "[" + b.String() + "]"
}

// fiPingpong runs libfabric's fi_pingpong over shm with 8-byte messages.
func fiPingpong(ctx context.Context) ([]byte, error) {
	r, err := fipingpong.Run(ctx, "fi_pingpong", "shm", 8, max(*fiIters, 1))
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "RESULT ps_lat 8 %g\n", r.Usec), nil
}

// metricUnits are the metrics in the order the tables show them.
var metricUnits = []struct{ name, unit string }{
	{"put_lat", "us"}, {"put_bw", "MB/s"}, {"ps_lat", "us"}, {"ps_issue", "us"},
}

// records are the -json lines: one per tool, metric and size measured.
func records(res results, sizes []int, tools []string) []benchrec.Record {
	var rs []benchrec.Record
	for _, t := range tools {
		for _, m := range metricUnits {
			for _, s := range sizes {
				n := len(res[t][m.name][s])
				if n == 0 {
					continue
				}
				r := benchrec.Record{Tool: "onesided", Area: "onesided", Case: t, Size: strconv.Itoa(s), Metric: m.name, Unit: m.unit,
					Value: res.median(t, m.name, s), Reps: n}
				if m.name == "ps_lat" && s == 8 && slices.Contains(shmTools(tools), t) && len(pairedRatios[t]) > 0 {
					p := slices.Sorted(slices.Values(pairedRatios[t]))
					r.Ref, r.RefValue, r.Ratio = "fi_pingpong", res.median("fi_pingpong", "ps_lat", 8), medianOf(p)
				}
				rs = append(rs, r)
			}
		}
	}
	return rs
}

func printTable(res results, sizes []int, tools []string) {
	for _, m := range metricUnits {
		var cols []string
		for _, t := range tools {
			if res[t][m.name] != nil {
				cols = append(cols, t)
			}
		}
		if len(cols) == 0 {
			continue
		}
		fmt.Printf("\n%s (%s, median of %d)\n\n| bytes |", m.name, strings.Replace(m.unit, "us", "µs", 1), *reps)
		for _, c := range cols {
			fmt.Printf(" %s |", c)
		}
		fmt.Printf("\n|---|%s\n", strings.Repeat("---|", len(cols)))
		for _, s := range sizes {
			any := false
			line := fmt.Sprintf("| %d |", s)
			for _, c := range cols {
				v := res.median(c, m.name, s)
				if math.IsNaN(v) {
					line += " – |"
					continue
				}
				any = true
				line += fmt.Sprintf(" %.3f |", v)
			}
			if any {
				fmt.Println(line)
			}
		}
	}
	for _, t := range shmTools(tools) {
		if d, f := res.median(t, "ps_lat", 8), res.median("fi_pingpong", "ps_lat", 8); !math.IsNaN(d) && !math.IsNaN(f) {
			fmt.Printf("\n%s PutSignal ping-pong / fi_pingpong at 8 B: %.2f (target ≤ 1.2)\n", t, d/f)
		}
	}
	if d := res.median("weft-direct", "ps_issue", 8); !math.IsNaN(d) {
		fmt.Printf("weft-direct PutSignal 8 B issue: %.4f µs (target ≤ 0.1)\n", d)
	}
	if d := res.median("weft-direct", "ps_lat", 8); !math.IsNaN(d) {
		fmt.Printf("weft-direct PutSignal ping-pong half round trip 8 B: %.4f µs\n", d)
	}
}

// rankMain is one of the two benchmark ranks.
func rankMain(sizes []int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bs, err := job.Init(ctx)
	if err != nil {
		return err
	}
	defer bs.Finalize()
	if bs.Size() != 2 {
		return fmt.Errorf("needs 2 ranks, got %d", bs.Size())
	}
	g := onesided.JobGroup(bs)
	var opts []onesided.Option
	switch *path {
	case "direct":
		opts = append(opts, onesided.WithSharedMemory(onesided.ShmOnly))
	case "shm":
		opts = append(opts, onesided.WithSharedMemory(onesided.ShmOff), onesided.WithProvider("shm"))
	default:
		return fmt.Errorf("path %q", *path)
	}
	maxSize := 0
	for _, s := range sizes {
		maxSize = max(maxSize, s)
	}
	const window = 64
	const sigOff = 0
	dataOff := 64
	w, err := onesided.Allocate(ctx, g, dataOff+window*maxSize, opts...)
	if err != nil {
		return err
	}
	defer w.Free(ctx)
	me := bs.Rank()
	src := make([]byte, maxSize)
	for i := range src {
		src[i] = byte(i)
	}
	scale := func(size, base int) int {
		n := base
		if size >= 32<<10 {
			n = base / 10
		}
		if size >= 256<<10 {
			n = base / 50
		}
		return max(n, 20)
	}
	seq := uint64(0)
	for _, size := range sizes {
		// put_lat: Put + Flush.
		n := scale(size, *iters)
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if me == 0 {
			warm := n / 10
			var t0 time.Time
			for i := 0; i < n+warm; i++ {
				if i == warm {
					t0 = time.Now()
				}
				if err := w.Put(1, dataOff, src[:size]); err != nil {
					return err
				}
				if err := w.Flush(ctx, 1); err != nil {
					return err
				}
			}
			fmt.Printf("RESULT put_lat %d %.4f\n", size, us(time.Since(t0))/float64(n))
		}
		// put_bw: 64 puts, one flush.
		n = scale(size, *iters/10)
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if me == 0 {
			warm := n / 10
			var t0 time.Time
			for i := 0; i < n+warm; i++ {
				if i == warm {
					t0 = time.Now()
				}
				for j := 0; j < window; j++ {
					if err := w.Put(1, dataOff+j*size, src[:size]); err != nil {
						return err
					}
				}
				if err := w.Flush(ctx, 1); err != nil {
					return err
				}
			}
			fmt.Printf("RESULT put_bw %d %.2f\n", size, float64(size*window*n)/time.Since(t0).Seconds()/1e6)
		}
		// ps_lat: PutSignal ping-pong.
		n = scale(size, *iters)
		if err := w.Fence(ctx); err != nil {
			return err
		}
		warm := n / 10
		var t0 time.Time
		peer := 1 - me
		for i := 0; i < n+warm; i++ {
			if i == warm {
				t0 = time.Now()
			}
			seq++
			if me == 0 {
				if err := w.PutSignal(peer, dataOff, src[:size], sigOff, seq); err != nil {
					return err
				}
				if _, err := w.WaitSignal(ctx, sigOff, onesided.CmpGE, seq); err != nil {
					return err
				}
			} else {
				if _, err := w.WaitSignal(ctx, sigOff, onesided.CmpGE, seq); err != nil {
					return err
				}
				if err := w.PutSignal(peer, dataOff, src[:size], sigOff, seq); err != nil {
					return err
				}
			}
		}
		if me == 0 {
			fmt.Printf("RESULT ps_lat %d %.4f\n", size, us(time.Since(t0))/float64(2*n))
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
	}
	// ps_issue: the cost of one 8-byte PutSignal with direct stores.
	if *path == "direct" && me == 0 {
		const n = 1_000_000
		base := seq + 1
		t0 := time.Now()
		for i := uint64(0); i < n; i++ {
			if err := w.PutSignal(1, dataOff, src[:8], sigOff+8, base+i); err != nil {
				return err
			}
		}
		fmt.Printf("RESULT ps_issue 8 %.4f\n", us(time.Since(t0))/n)
	}
	return w.Fence(ctx)
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
