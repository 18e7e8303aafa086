package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/cmplx"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testenv"
)

var bins = proctest.NewBuilder("github.com/weft-hpc/weft/cmd/fabrun", "github.com/weft-hpc/weft/examples/fft2d")

func TestMain(m *testing.M) {
	code := m.Run()
	bins.Close()
	os.Exit(code)
}

// runJob runs the example under fabrun as n ranks (proctest.RunExample).
func runJob(t *testing.T, n int, env []string, args ...string) proctest.Result {
	t.Helper()
	return proctest.RunExample(t, bins.Path(t, "fabrun"), bins.Path(t, "fft2d"), n, env, args...)
}

// TestFFT2D runs the transform under fabrun with the overlapped transpose
// (fixed shapes, a tile that does not divide the rows, a tuned shape, the
// window through libfabric instead of direct stores) and with the plain
// Alltoall, and checks every rank's line and rank 0's summary: each rank
// compared its columns with a direct 2D DFT.
func TestFFT2D(t *testing.T) {
	for _, c := range []struct {
		name string
		np   int
		args []string
		env  []string
		how  string
		long bool // left out with -short (the race pass of make test runs the same processes again)
	}{
		{"n2-tiled", 2, []string{"-n", "64", "-k", "4", "-d", "2"}, nil, "tiled K=4 D=2", false},
		{"n4-tiled-uneven", 4, []string{"-n", "64", "-k", "3", "-d", "1"}, nil, "tiled K=3 D=1", false},
		{"n4-tuned", 4, []string{"-n", "128", "-tune"}, nil, "tiled K=[0-9]+ D=[1-3]", true},
		{"n2-tiled-libfabric", 2, []string{"-n", "32", "-k", "2", "-d", "3"}, []string{"WEFT_ONESIDED_SHM=off"}, "tiled K=2 D=3", true},
		{"n4-plain", 4, []string{"-n", "64", "-plain"}, nil, "alltoall", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.long {
				testenv.Short(t, "fft2d "+c.name)
			}
			r := runJob(t, c.np, c.env, c.args...)
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			n := 0
			fmt.Sscan(c.args[1], &n)
			for rank := range c.np {
				w := n / c.np
				want := fmt.Sprintf("[%d] rank %d of %d: columns %d..%d, fft2d ok\n", rank, rank, c.np, rank*w, (rank+1)*w-1)
				if !strings.Contains(r.Stdout, want) {
					t.Errorf("missing %q in:\n%s%s", want, r.Stdout, r.Stderr)
				}
			}
			re := regexp.MustCompile(fmt.Sprintf(`(?m)^\[0\] fft2d: %d ranks, %dx%d, transpose %s, max relative diff [0-9.e+-]+ vs direct DFT \(tolerance [0-9e.+-]+\)$`,
				c.np, n, n, c.how))
			if !re.MatchString(r.Stdout) {
				t.Errorf("no summary matching %s in:\n%s%s", re, r.Stdout, r.Stderr)
			}
		})
	}
}

// TestRanksMustDivide: a matrix whose rows do not split evenly is refused
// on every rank, exit status 1.
func TestRanksMustDivide(t *testing.T) {
	r := runJob(t, 3, nil, "-n", "64")
	if r.Code != 1 || !strings.Contains(r.Stderr, "fft2d: a 64x64 matrix does not split into 3 equal row blocks") {
		t.Fatalf("exit %d, want 1 and the reason\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestBadFlags: bad values are usage errors (exit status 2), found before
// the program joins a job.
func TestBadFlags(t *testing.T) {
	prog := bins.Path(t, "fft2d")
	for _, args := range [][]string{{"-n", "48"}, {"-n", "0"}, {"-n", "2048"}, {"-k", "-1"}, {"-d", "9"}, {"-plain", "-tune"}, {"-reps", "0"}, {"-timeout", "0s"}, {"extra"}} {
		r := proctest.Run(t, 30*time.Second, nil, "", prog, args...)
		if r.Code != 2 || !strings.HasPrefix(r.Stderr, "fft2d: ") || r.Stdout != "" {
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
	for _, args := range [][]string{{"-n", "16", "-k", "3"}, {"-n", "16", "-plain"}} {
		var out bytes.Buffer
		if err := run(append(args, "-timeout", "30s"), &out); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if !strings.HasPrefix(out.String(), "rank 0 of 1: columns 0..15, fft2d ok\nfft2d: 1 ranks, 16x16, transpose ") {
			t.Errorf("%q: output\n%s", args, out.String())
		}
	}
}

// TestCheckHasTeeth: the direct DFT agrees with row and column FFTs of
// the matrix, and a part whose blocks sit in the wrong place (the
// transposition skipped) is beyond the tolerance: the check can fail.
func TestCheckHasTeeth(t *testing.T) {
	const n = 16
	ref := directColumns(n, 0, n)
	a := make([][]complex128, n)
	tw := twiddles(n)
	for i := range a {
		a[i] = make([]complex128, n)
		for j := range a[i] {
			a[i][j] = input(i, j)
		}
		fft(a[i], tw)
	}
	right, wrong := make([][]complex128, n), make([][]complex128, n)
	for j := range right {
		right[j], wrong[j] = make([]complex128, n), append([]complex128(nil), a[j]...)
		for i := range n {
			right[j][i] = a[i][j]
		}
		fft(right[j], tw)
		fft(wrong[j], tw)
	}
	worst := func(got [][]complex128) float64 {
		d := 0.0
		for j := range got {
			for k := range got[j] {
				d = max(d, cmplx.Abs(got[j][k]-ref[j][k]))
			}
		}
		return d
	}
	if d := worst(right); d > tolerance(n) {
		t.Errorf("FFT by rows and columns differs from the direct DFT by %g", d)
	}
	if d := worst(wrong); d <= tolerance(n)*100 {
		t.Errorf("an untransposed result is within %g of the direct DFT: the check cannot fail", d)
	}
}
