package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testenv"
)

var bins = proctest.NewBuilder("github.com/weft-hpc/weft/cmd/fabrun", "github.com/weft-hpc/weft/examples/halo")

func TestMain(m *testing.M) {
	code := m.Run()
	bins.Close()
	os.Exit(code)
}

// summary is the line rank 0 prints for a correct run: the sum is the
// serial run's, computed here.
func summary(t *testing.T, n, gy, gx, iters int, periodic bool) string {
	t.Helper()
	ref, err := serial(context.Background(), gy, gx, iters, periodic)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("[0] halo: %d ranks, %dx%d grid, %d iterations, max |diff| 0 vs serial, sum %v\n", n, gy, gx, iters, interiorSum(ref, gy, gx))
}

// runJob runs the example under fabrun as n ranks (proctest.RunExample).
func runJob(t *testing.T, n int, env []string, args ...string) proctest.Result {
	t.Helper()
	return proctest.RunExample(t, bins.Path(t, "fabrun"), bins.Path(t, "halo"), n, env, args...)
}

// TestHalo runs the example under fabrun on 2x2 and 3x2 process grids,
// bounded and periodic, on both node transports, with the datatype JIT
// off and with the exchange by a neighbourhood collective, and checks every rank's line and rank 0's summary (whose sum must
// be the serial run's).
func TestHalo(t *testing.T) {
	for _, c := range []struct {
		name     string
		n        int
		py, px   int
		gy, gx   int
		iters    int
		periodic bool
		env      []string
	}{
		{"n4", 4, 2, 2, 24, 30, 50, false, nil},
		{"n4-periodic", 4, 2, 2, 24, 30, 50, true, nil},
		{"n6-uneven", 6, 3, 2, 25, 31, 40, false, nil}, // blocks of 9, 8 and 8 rows, 16 and 15 columns
		{"n6-periodic", 6, 3, 2, 24, 30, 50, true, nil},
		{"n6-periodic-fabric", 6, 3, 2, 24, 30, 50, true, []string{"WEFT_NODE_TRANSPORT=fabric"}},
		{"n4-jit-off", 4, 2, 2, 24, 30, 50, false, []string{"WEFT_JIT=off"}},
		{"n4-neighbor", 4, 2, 2, 24, 30, 50, false, nil},
		{"n4-periodic-neighbor", 4, 2, 2, 24, 30, 50, true, nil},
		{"n6-uneven-neighbor-fabric", 6, 3, 2, 25, 31, 40, false, []string{"WEFT_NODE_TRANSPORT=fabric"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.n > 4 {
				// The race pass (-short) keeps the 2x2 grids: six
				// race-instrumented ranks on two cores beside the other
				// packages' tests outwait the job's timeouts.
				testenv.Short(t, "the 3x2 process grids")
			}
			r := runJob(t, c.n, c.env, "-ny", fmt.Sprint(c.gy), "-nx", fmt.Sprint(c.gx),
				"-iters", fmt.Sprint(c.iters), fmt.Sprintf("-periodic=%v", c.periodic),
				fmt.Sprintf("-neighbor=%v", strings.Contains(c.name, "neighbor")))
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			for rank := range c.n {
				want := fmt.Sprintf("[%d] rank %d of %d: block (%d,%d) of %dx%d, halo ok\n",
					rank, rank, c.n, rank/c.px, rank%c.px, c.py, c.px)
				if !strings.Contains(r.Stdout, want) {
					t.Errorf("missing %q in:\n%s%s", want, r.Stdout, r.Stderr)
				}
			}
			if want := summary(t, c.n, c.gy, c.gx, c.iters, c.periodic); !strings.Contains(r.Stdout, want) {
				t.Errorf("missing %q in:\n%s%s", want, r.Stdout, r.Stderr)
			}
			if got := strings.Count(r.Stdout, "\n"); got != c.n+1 {
				t.Errorf("%d lines of output, want %d:\n%s", got, c.n+1, r.Stdout)
			}
		})
	}
}

// TestGridTooSmall: a grid with fewer rows than the process grid has rows
// of ranks is refused with a clear error on every rank, exit status 1.
func TestGridTooSmall(t *testing.T) {
	r := runJob(t, 6, nil, "-ny", "2", "-nx", "10")
	if r.Code != 1 || !strings.Contains(r.Stderr, "halo: a 2x10 grid is too small for 6 ranks as 3x2 blocks") {
		t.Fatalf("exit %d, want 1 and the reason\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestBadFlags: bad values are usage errors (exit status 2), found before
// the program joins a job.
func TestBadFlags(t *testing.T) {
	halo := bins.Path(t, "halo")
	for _, args := range [][]string{{"-nx", "0"}, {"-ny", "-3"}, {"-ny", "100000", "-nx", "100000"}, {"-ny", "1", "-nx", "9223372036854775807"}, {"-iters", "-1"}, {"-timeout", "0s"}, {"-iters", "x"}, {"extra"}} {
		r := proctest.Run(t, 30*time.Second, nil, "", halo, args...)
		if r.Code != 2 || !strings.HasPrefix(r.Stderr, "halo: ") || r.Stdout != "" {
			t.Errorf("%q: exit %d, want 2 and a message\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
		var ue usageError
		if _, err := parseFlags(args); !errors.As(err, &ue) {
			t.Errorf("%q: parseFlags error %v, want a usageError", args, err)
		}
	}
}

// TestSingleton runs the program in this process as a job of one rank:
// on a periodic 1x1 process grid every halo message goes from the rank to
// itself.
func TestSingleton(t *testing.T) {
	proctest.Alone(t)
	for _, periodic := range []bool{false, true} {
		for _, neighbor := range []bool{false, true} {
			var out bytes.Buffer
			if err := run([]string{"-ny", "7", "-nx", "9", "-iters", "12", fmt.Sprintf("-periodic=%v", periodic),
				fmt.Sprintf("-neighbor=%v", neighbor), "-timeout", "30s"}, &out); err != nil {
				t.Fatal(err)
			}
			want := "rank 0 of 1: block (0,0) of 1x1, halo ok\n" + strings.TrimPrefix(summary(t, 1, 7, 9, 12, periodic), "[0] ")
			if out.String() != want {
				t.Errorf("periodic=%v neighbor=%v: output\n%s\nwant\n%s", periodic, neighbor, out.String(), want)
			}
		}
	}
}

// TestTimeout: a rank alone has nothing to wait for, yet -timeout still
// ends a run that would take too long.
func TestTimeout(t *testing.T) {
	proctest.Alone(t)
	start := time.Now()
	err := run([]string{"-iters", "1000000000", "-timeout", "300ms"}, io.Discard)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v to notice a 300ms timeout", took)
	}
}

// TestSplit: the blocks of every process grid tile the global grid, each
// cell in exactly one block, block sizes differing by at most one.
func TestSplit(t *testing.T) {
	for n := 1; n <= 13; n++ {
		for p := 1; p <= n; p++ {
			next, lo, hi := 0, n, 0
			for k := range p {
				first, length := split(n, p, k)
				if first != next || length < 1 {
					t.Fatalf("split(%d, %d, %d) = %d, %d; want first %d and a length", n, p, k, first, length, next)
				}
				next += length
				lo, hi = min(lo, length), max(hi, length)
			}
			if next != n || hi-lo > 1 {
				t.Fatalf("split(%d, %d, ·) covers %d cells, lengths %d..%d", n, p, next, lo, hi)
			}
		}
	}
}

// TestCheckHasTeeth runs the distributed algorithm in this process, blocks
// of a 3x2 process grid refreshing their ghost frames by copying from
// their neighbours (what the exchange does), and checks that it matches
// the serial run bit for bit, while blocks whose halos are never refreshed
// do not: the comparison the program makes can fail.
func TestCheckHasTeeth(t *testing.T) {
	const gy, gx, iters = 13, 11, 9
	dims := []int{3, 2}
	for _, periodic := range []bool{false, true} {
		ref, err := serial(context.Background(), gy, gx, iters, periodic)
		if err != nil {
			t.Fatal(err)
		}
		for _, refresh := range []bool{true, false} {
			got := emulate(gy, gx, iters, periodic, dims, refresh)
			worst := 0.0
			for py := range dims[0] {
				for px := range dims[1] {
					worst = max(worst, maxDiff(got, ref, blockOf([]int{py, px}, dims, gy, gx), gx))
				}
			}
			if refresh && worst != 0 {
				t.Errorf("periodic=%v: blocks with their halos refreshed differ from serial by %g", periodic, worst)
			}
			if !refresh && worst == 0 {
				t.Errorf("periodic=%v: blocks without halo exchange match the serial run: the check cannot fail", periodic)
			}
		}
	}
	nan := make([]float64, 9) // a 1x1 grid with its ghost frame
	nan[4] = math.NaN()
	if d := maxDiff(nan, make([]float64, 9), block{ny: 1, nx: 1}, 1); !math.IsInf(d, 1) {
		t.Errorf("maxDiff with a NaN = %v, want +Inf", d)
	}
}

// emulate iterates the blocks of a dims process grid one after the other
// in this process and returns the global grid they make. With refresh,
// each iteration first fills every block's ghost frame from a global
// picture of the current values (the exchange's result); without, the
// ghosts keep their starting values.
func emulate(gy, gx, iters int, periodic bool, dims []int, refresh bool) []float64 {
	type part struct {
		b block
		u [2][]float64
	}
	var parts []part
	for py := range dims[0] {
		for px := range dims[1] {
			b := blockOf([]int{py, px}, dims, gy, gx)
			parts = append(parts, part{b, [2][]float64{b.initial(gy, gx), b.initial(gy, gx)}})
		}
	}
	g := block{ny: gy, nx: gx}
	assemble := func(k int) []float64 {
		global := g.initial(gy, gx) // the fixed boundary
		for _, p := range parts {
			for i := 1; i <= p.b.ny; i++ {
				for j := 1; j <= p.b.nx; j++ {
					global[g.at(p.b.y0+i, p.b.x0+j)] = p.u[k][p.b.at(i, j)]
				}
			}
		}
		if periodic {
			wrap(global, g)
		}
		return global
	}
	for it := range iters {
		src, dst := it%2, 1-it%2
		if refresh {
			global := assemble(src)
			for _, p := range parts {
				for i := range p.b.ny + 2 {
					for j := range p.b.nx + 2 {
						if i == 0 || i == p.b.ny+1 || j == 0 || j == p.b.nx+1 {
							p.u[src][p.b.at(i, j)] = global[g.at(p.b.y0+i, p.b.x0+j)]
						}
					}
				}
			}
		}
		for _, p := range parts {
			sweep(p.u[dst], p.u[src], p.b.ny, p.b.nx)
		}
	}
	return assemble(iters % 2)
}
