// Command startup times whole jobs from launch to exit: fabrun -n N of
// weft's hello (which starts a job, selects a provider, exchanges endpoint
// addresses, passes a token round a ring and fences) against MPICH's
// mpiexec.hydra -n N of an MPI hello built with mpicc (MPI_Init, one line,
// MPI_Finalize), and against the libfabric floor: fabrun -n N of a C
// program that only loads the system's libfabric and calls fi_getinfo once
// (floor/floor.c), which is what any libfabric program pays before it does
// anything (docs/perf/startup.md). The jobs alternate round by round so that
// load on the machine hits them alike; the figures are medians, and the
// ratios medians of the per-round ratios.
//
//	go build -o bin/ ./cmd/... ./examples/...
//	go run ./test/bench/startup -bin bin -n 1,4 -rounds 11 [-json]
//
// -bin may name several build directories separated by commas (say, this
// build and one of the previous commit): each one's hello joins the
// rotation, and the first is the one reported as weft's. With -json it
// writes benchrec records (JSON lines) per rank count: tool "startup",
// metric "wall" (ms) of case fabrun-PROG-PROVIDER (PROG: -prog) against ref
// "mpiexec.hydra", the same for libfabric-floor-PROVIDER, and metric
// "over-floor" of fabrun-hello-PROVIDER: the median per-round excess over
// the floor in ms, with ratio hello ÷ floor; the hello of a further build
// has case fabrun-hello-PROVIDER@DIR. Otherwise it prints a table. Without
// mpicc or mpiexec.hydra it leaves MPICH out; without a C compiler, the
// floor.
package main

import (
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-hpc/weft/internal/benchrec"
)

var (
	//go:embed mpi/hello.c
	mpiHello []byte
	//go:embed floor/floor.c
	floorSrc []byte
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "startup: %v\n", err)
		os.Exit(1)
	}
}

// job is one command timed in every round, with its times.
type job struct {
	label, build string // build: the -bin directory of a weft hello
	argv         []string
	times        []float64
}

func run() error {
	bins := flag.String("bin", "bin", "directories holding fabrun and hello, separated by commas (the first is reported as weft's)")
	ranks := flag.String("n", "1,4", "comma-separated rank counts")
	rounds := flag.Int("rounds", 11, "jobs per launcher and rank count")
	provider := flag.String("provider", "shm", "provider for the weft job")
	prog := flag.String("prog", "hello", "the weft program in each -bin directory: hello (examples/hello, libfabric directly) or ephello (test/bench/startup/ephello, the endpoint package)")
	jsonOut := flag.Bool("json", false, "write benchrec records (JSON lines)")
	flag.Parse()
	if *rounds < 1 {
		return fmt.Errorf("-rounds %d: need at least 1", *rounds)
	}
	var ns []int
	for f := range strings.SplitSeq(*ranks, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-n %q: want positive rank counts separated by commas", *ranks)
		}
		ns = append(ns, n)
	}
	var dirs []string
	for d := range strings.SplitSeq(*bins, ",") {
		if d = strings.TrimSpace(d); d == "" {
			return fmt.Errorf("-bin %q: empty directory name", *bins)
		}
		for _, p := range []string{filepath.Join(d, "fabrun"), filepath.Join(d, *prog)} {
			if _, err := os.Stat(p); err != nil {
				return fmt.Errorf("%w (build with: go build -o %s/ ./cmd/... ./examples/...)", err, d)
			}
		}
		dirs = append(dirs, d)
	}
	tmp, err := os.MkdirTemp("", "weft-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	mpiProg, err := buildMPIHello(tmp)
	if err != nil {
		fmt.Fprintf(os.Stderr, "startup: no MPICH reference: %v\n", err)
	}
	floorProg, err := buildFloor(tmp)
	if err != nil {
		fmt.Fprintf(os.Stderr, "startup: no libfabric floor: %v\n", err)
	}

	fabrun := filepath.Join(dirs[0], "fabrun")
	var rs []benchrec.Record
	var table [][]string
	for _, n := range ns {
		np := strconv.Itoa(n)
		var jobs []*job
		for _, d := range dirs {
			jobs = append(jobs, &job{label: "fabrun " + *prog, build: d,
				argv: []string{filepath.Join(d, "fabrun"), "-n", np, "--provider", *provider, filepath.Join(d, *prog)}})
		}
		var floor, mpi *job
		if floorProg != "" {
			floor = &job{label: "fabrun libfabric floor", argv: []string{fabrun, "-n", np, floorProg, *provider}}
			jobs = append(jobs, floor)
		}
		if mpiProg != "" {
			mpi = &job{label: "mpiexec.hydra MPI hello", argv: []string{"mpiexec.hydra", "-launcher", "fork", "-n", np, mpiProg}}
			jobs = append(jobs, mpi)
		}
		for range *rounds {
			for _, j := range jobs {
				d, err := timeJob(j.argv)
				if err != nil {
					return err
				}
				j.times = append(j.times, d)
			}
		}
		for i, j := range jobs {
			label := j.label
			if len(dirs) > 1 && j.build != "" {
				label += " (" + j.build + ")"
			}
			table = append(table, []string{np, label, fmt.Sprintf("%.0f", median(j.times)),
				ratioCell(j, mpi), ratioCell(j, floor)})
			var cs string
			switch {
			case j == floor:
				cs = "libfabric-floor-" + *provider
			case j == mpi:
				continue
			case i == 0:
				cs = "fabrun-" + *prog + "-" + *provider
			default:
				cs = "fabrun-" + *prog + "-" + *provider + "@" + j.build
			}
			r := benchrec.Record{Tool: "startup", Area: "launch", Case: cs, Size: np,
				Metric: "wall", Unit: "ms", Value: median(j.times), Reps: *rounds, Stat: "median"}
			if mpi != nil {
				r.Ref, r.RefValue, r.Ratio = "mpiexec.hydra", median(mpi.times), benchrec.Finite(median(ratios(j, mpi)))
			}
			rs = append(rs, r)
			if i == 0 && floor != nil {
				over := make([]float64, len(j.times))
				for k := range over {
					over[k] = j.times[k] - floor.times[k]
				}
				rs = append(rs, benchrec.Record{Tool: "startup", Area: "launch", Case: cs, Size: np,
					Metric: "over-floor", Unit: "ms", Value: median(over), Reps: *rounds, Stat: "median",
					Ref: "libfabric-floor", RefValue: median(floor.times), Ratio: benchrec.Finite(median(ratios(j, floor)))})
			}
		}
	}
	if *jsonOut {
		return benchrec.Write(os.Stdout, rs)
	}
	fmt.Printf("%-6s %-40s %-9s %-9s %s\n", "ranks", "job", "ms", "÷hydra", "÷floor")
	for _, row := range table {
		fmt.Printf("%-6s %-40s %-9s %-9s %s\n", row[0], row[1], row[2], row[3], row[4])
	}
	return nil
}

// ratios is j's time ÷ ref's, round by round.
func ratios(j, ref *job) []float64 {
	r := make([]float64, len(j.times))
	for k := range r {
		r[k] = j.times[k] / ref.times[k]
	}
	return r
}

// ratioCell is the median of j's per-round ratios to ref for the table, or
// "-" without ref.
func ratioCell(j, ref *job) string {
	if ref == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", median(ratios(j, ref)))
}

// buildMPIHello compiles mpi/hello.c with MPICH's mpicc into dir.
func buildMPIHello(dir string) (string, error) {
	if _, err := exec.LookPath("mpiexec.hydra"); err != nil {
		return "", err
	}
	mpicc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		if mpicc, err = exec.LookPath("mpicc"); err != nil {
			return "", err
		}
	}
	return compile(dir, "mpihello", mpiHello, mpicc)
}

// buildFloor compiles floor/floor.c against the system's libfabric into
// dir.
func buildFloor(dir string) (string, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", err
	}
	return compile(dir, "floor", floorSrc, cc, "-lfabric")
}

// compile writes src to dir/name.c and compiles it with cc into dir/name.
func compile(dir, name string, src []byte, cc string, libs ...string) (string, error) {
	file := filepath.Join(dir, name+".c")
	if err := os.WriteFile(file, src, 0o600); err != nil {
		return "", err
	}
	prog := filepath.Join(dir, name)
	args := append([]string{"-O", "-o", prog, file}, libs...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %w: %s", cc, err, out)
	}
	return prog, nil
}

// timeJob runs argv to completion and returns its wall time in ms; a job
// that fails is an error (with its output), since its time means nothing.
func timeJob(argv []string) (float64, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return 0, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
		}
		return 0, err
	}
	return float64(d.Microseconds()) / 1e3, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
