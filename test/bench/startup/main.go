// Command startup times whole jobs from launch to exit: fabrun -n N of
// weft's hello (which starts a job, selects a provider, exchanges endpoint
// addresses, passes a token round a ring and fences) against MPICH's
// mpiexec.hydra -n N of an MPI hello built with mpicc (MPI_Init, one line,
// MPI_Finalize). The two alternate round by round so that load on the
// machine hits both alike; the figures are medians.
//
//	go build -o bin/ ./cmd/... ./examples/...
//	go run ./test/bench/startup -bin bin -n 1,4 -rounds 11 [-json]
//
// With -json it writes one benchrec.Record a line per rank count (tool
// "startup", metric "wall", unit ms, ref "mpiexec.hydra", ratio the median
// of the per-round ratios); otherwise a table. Without mpicc or
// mpiexec.hydra it times fabrun alone.
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

//go:embed mpi/hello.c
var mpiHello []byte

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "startup: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("bin", "bin", "directory holding fabrun and hello")
	ranks := flag.String("n", "1,4", "comma-separated rank counts")
	rounds := flag.Int("rounds", 11, "jobs per launcher and rank count")
	provider := flag.String("provider", "shm", "provider for the weft job")
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
	fabrun, hello := filepath.Join(*bin, "fabrun"), filepath.Join(*bin, "hello")
	for _, p := range []string{fabrun, hello} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (build with: go build -o %s/ ./cmd/... ./examples/...)", err, *bin)
		}
	}
	mpiProg, cleanup, err := buildMPIHello()
	if err != nil {
		fmt.Fprintf(os.Stderr, "startup: no MPICH reference: %v\n", err)
	}
	defer cleanup()

	var rs []benchrec.Record
	for _, n := range ns {
		weft := []string{fabrun, "-n", strconv.Itoa(n), "--provider", *provider, hello}
		var mpi []string
		if mpiProg != "" {
			mpi = []string{"mpiexec.hydra", "-launcher", "fork", "-n", strconv.Itoa(n), mpiProg}
		}
		var ours, theirs, ratios []float64
		for range *rounds {
			d, err := timeJob(weft)
			if err != nil {
				return err
			}
			ours = append(ours, d)
			if mpi != nil {
				d, err := timeJob(mpi)
				if err != nil {
					return err
				}
				theirs = append(theirs, d)
				ratios = append(ratios, ours[len(ours)-1]/d)
			}
		}
		r := benchrec.Record{Tool: "startup", Area: "launch", Case: "fabrun-hello-" + *provider, Size: strconv.Itoa(n),
			Metric: "wall", Unit: "ms", Value: median(ours), Reps: *rounds, Stat: "median"}
		if mpi != nil {
			r.Ref, r.RefValue, r.Ratio = "mpiexec.hydra", median(theirs), benchrec.Finite(median(ratios))
		}
		rs = append(rs, r)
	}
	if *jsonOut {
		return benchrec.Write(os.Stdout, rs)
	}
	fmt.Printf("%-6s %-22s %-22s %s\n", "ranks", "fabrun hello (ms)", "mpiexec.hydra (ms)", "ratio")
	for _, r := range rs {
		ref := "-"
		if r.Ref != "" {
			ref = fmt.Sprintf("%.0f", r.RefValue)
		}
		fmt.Printf("%-6s %-22.0f %-22s %.2f\n", r.Size, r.Value, ref, r.Ratio)
	}
	return nil
}

// buildMPIHello compiles mpi/hello.c with MPICH's mpicc into a temporary
// directory; cleanup removes it.
func buildMPIHello() (prog string, cleanup func(), err error) {
	cleanup = func() {}
	if _, err := exec.LookPath("mpiexec.hydra"); err != nil {
		return "", cleanup, err
	}
	mpicc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		if mpicc, err = exec.LookPath("mpicc"); err != nil {
			return "", cleanup, err
		}
	}
	dir, err := os.MkdirTemp("", "weft-startup-")
	if err != nil {
		return "", cleanup, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	src := filepath.Join(dir, "mpihello.c")
	if err := os.WriteFile(src, mpiHello, 0o600); err != nil {
		return "", cleanup, err
	}
	prog = filepath.Join(dir, "mpihello")
	if out, err := exec.Command(mpicc, "-O", "-o", prog, src).CombinedOutput(); err != nil {
		return "", cleanup, fmt.Errorf("%s: %w: %s", mpicc, err, out)
	}
	return prog, cleanup, nil
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
