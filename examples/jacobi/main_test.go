package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testenv"
)

var bins = proctest.NewBuilder("github.com/weft-hpc/weft/cmd/fabrun", "github.com/weft-hpc/weft/examples/jacobi")

func TestMain(m *testing.M) {
	code := m.Run()
	bins.Close()
	os.Exit(code)
}

// runJob runs the example under fabrun as n ranks (proctest.RunExample).
func runJob(t *testing.T, n int, env []string, args ...string) proctest.Result {
	t.Helper()
	return proctest.RunExample(t, bins.Path(t, "fabrun"), bins.Path(t, "jacobi"), n, env, args...)
}

// summary is rank 0's last line for a correct run; the iteration count
// and residual come from a serial run here.
func summary(t *testing.T, np, ny, nx int, tol float64) string {
	t.Helper()
	cfg := config{ny: ny, nx: nx, tol: tol, maxIter: 100000}
	_, iters, err := serial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("[0] jacobi: %d ranks, %dx%d grid, converged after %d iterations (residual ", np, ny, nx, iters)
}

// TestJacobi runs the solver under fabrun on 2, 3 and 4 ranks (even and
// uneven bands, both node transports) and checks every rank's line and
// rank 0's summary, whose iteration count must be the serial run's (the
// program itself compared the grid with the serial one bit for bit).
func TestJacobi(t *testing.T) {
	for _, c := range []struct {
		name   string
		np     int
		ny, nx int
		tol    float64
		env    []string
		long   bool // left out with -short (the race pass of make test runs the same processes again)
	}{
		{"n4", 4, 24, 20, 1e-3, nil, false},
		{"n3-uneven", 3, 31, 17, 1e-4, nil, true},
		{"n2-fabric", 2, 16, 16, 1e-3, []string{"WEFT_NODE_TRANSPORT=fabric"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.long {
				testenv.Short(t, "jacobi "+c.name)
			}
			r := runJob(t, c.np, c.env, "-ny", fmt.Sprint(c.ny), "-nx", fmt.Sprint(c.nx), "-tol", fmt.Sprint(c.tol))
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			for rank := range c.np {
				f, n := split(c.ny, c.np, rank)
				want := fmt.Sprintf("[%d] rank %d of %d: rows %d..%d, jacobi ok\n", rank, rank, c.np, f, f+n-1)
				if !strings.Contains(r.Stdout, want) {
					t.Errorf("missing %q in:\n%s%s", want, r.Stdout, r.Stderr)
				}
			}
			if want := summary(t, c.np, c.ny, c.nx, c.tol); !strings.Contains(r.Stdout, want) || !strings.Contains(r.Stdout, "max |diff| 0 vs serial\n") {
				t.Errorf("missing %q...max |diff| 0 in:\n%s%s", want, r.Stdout, r.Stderr)
			}
		})
	}
}

// TestNoConvergence: a run that reaches -maxiter fails with the
// residual, exit status 1 (every rank stops there; fabrun may end the
// others once the first has failed, so one message is enough); so does a
// grid with fewer rows than ranks. No rank claims success.
func TestNoConvergence(t *testing.T) {
	r := runJob(t, 2, nil, "-maxiter", "5")
	if r.Code != 1 || !strings.Contains(r.Stderr, "jacobi: no convergence after 5 iterations: residual") || strings.Contains(r.Stdout, "jacobi ok") {
		t.Errorf("exit %d, want 1 and the reason\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = runJob(t, 3, nil, "-ny", "2")
	if r.Code != 1 || !strings.Contains(r.Stderr, "jacobi: a grid of 2 rows is too small for 3 ranks") {
		t.Errorf("exit %d, want 1 and the reason\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestBadFlags: bad values are usage errors (exit status 2), found before
// the program joins a job.
func TestBadFlags(t *testing.T) {
	prog := bins.Path(t, "jacobi")
	for _, args := range [][]string{{"-ny", "0"}, {"-nx", "-2"}, {"-ny", "100000", "-nx", "100000"}, {"-tol", "0"}, {"-tol", "NaN"}, {"-tol", "-1"}, {"-maxiter", "0"}, {"-timeout", "0s"}, {"extra"}} {
		r := proctest.Run(t, 30*time.Second, nil, "", prog, args...)
		if r.Code != 2 || !strings.HasPrefix(r.Stderr, "jacobi: ") || r.Stdout != "" {
			t.Errorf("%q: exit %d, want 2 and a message\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
		var ue usageError
		if _, err := parseFlags(args); !errors.As(err, &ue) {
			t.Errorf("%q: parseFlags error %v, want a usageError", args, err)
		}
	}
}

// TestSingleton runs the program in this process as a job of one rank.
func TestSingleton(t *testing.T) {
	proctest.Alone(t)
	var out bytes.Buffer
	if err := run([]string{"-ny", "9", "-nx", "7", "-timeout", "30s"}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "rank 0 of 1: rows 0..8, jacobi ok\n" + strings.TrimPrefix(summary(t, 1, 9, 7, 1e-3), "[0] "); !strings.HasPrefix(out.String(), want) {
		t.Errorf("output\n%s\nwant a prefix\n%s", out.String(), want)
	}
}

// TestCheckHasTeeth: two bands whose ghost rows are never refreshed (no
// halo exchange) do not reproduce the serial grid after as many
// iterations, while bands refreshed from the global grid every iteration
// do, bit for bit: the program's comparison can fail.
func TestCheckHasTeeth(t *testing.T) {
	const ny, nx, iters = 12, 9, 30
	g := band{ny: ny, nx: nx}
	ref := [2][]float64{g.initial(), g.initial()}
	for it := range iters {
		sweep(ref[1-it%2], ref[it%2], g)
	}
	for _, refresh := range []bool{true, false} {
		var bands []band
		var us [][2][]float64
		for k := range 2 {
			f, n := split(ny, 2, k)
			b := band{y0: f, ny: n, nx: nx}
			bands, us = append(bands, b), append(us, [2][]float64{b.initial(), b.initial()})
		}
		glob := [2][]float64{g.initial(), g.initial()}
		for it := range iters {
			src := it % 2
			for k, b := range bands {
				if refresh {
					for j := 1; j <= nx; j++ {
						us[k][src][b.at(0, j)] = glob[src][g.at(b.y0, j)]
						us[k][src][b.at(b.ny+1, j)] = glob[src][g.at(b.y0+b.ny+1, j)]
					}
				}
				sweep(us[k][1-src], us[k][src], b)
				for i := 1; i <= b.ny; i++ {
					copy(glob[1-src][g.at(b.y0+i, 1):g.at(b.y0+i, nx+1)], us[k][1-src][b.at(i, 1):b.at(i, nx+1)])
				}
			}
		}
		diff := 0.0
		for i := range glob[iters%2] {
			diff = max(diff, glob[iters%2][i]-ref[iters%2][i], ref[iters%2][i]-glob[iters%2][i])
		}
		if refresh && diff != 0 {
			t.Errorf("refreshed bands differ from the serial run by %g", diff)
		}
		if !refresh && diff == 0 {
			t.Errorf("bands without halo exchange match the serial run: the check cannot fail")
		}
	}
}
