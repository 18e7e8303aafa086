package sidebyside

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/benchrec"
)

func sameFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return false
		}
	}
	return true
}

// TestFigures: figures are kept per repetition, NaN where missing; the
// best of several keys is taken repetition by repetition, ignoring NaN,
// the lowest or the highest.
func TestFigures(t *testing.T) {
	nan := math.NaN()
	f := NewFigures[string](3)
	f.Add("a", 0, 1)
	f.Add("a", 2, 5)
	f.Add("b", 0, 2)
	f.Add("b", 1, 4)
	f.Add("b", 2, 3)
	if s := f.Series("a"); !sameFloats(s, []float64{1, nan, 5}) {
		t.Errorf("Series(a) = %v", s)
	}
	if s := f.Series("none"); !sameFloats(s, []float64{nan, nan, nan}) {
		t.Errorf("Series(none) = %v", s)
	}
	if b := f.Best([]string{"a", "b", "none"}, true); !sameFloats(b, []float64{1, 4, 3}) {
		t.Errorf("lowest %v", b)
	}
	if b := f.Best([]string{"a", "b"}, false); !sameFloats(b, []float64{2, 4, 5}) {
		t.Errorf("highest %v", b)
	}
	if b := f.Best(nil, true); !sameFloats(b, []float64{nan, nan, nan}) {
		t.Errorf("best of nothing %v", b)
	}
}

func TestMedianRatiosCount(t *testing.T) {
	nan := math.NaN()
	if m := Median([]float64{3, nan, 1, 2}); m != 2 {
		t.Errorf("median ignoring NaN = %v", m)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of an even count = %v", m)
	}
	if m := Median([]float64{nan}); !math.IsNaN(m) {
		t.Errorf("median of nothing = %v", m)
	}
	if r := Ratios([]float64{1, nan, 3, 4}, []float64{2, 1, nan, 0}); !sameFloats(r, []float64{0.5, nan, nan, nan}) {
		t.Errorf("ratios %v", r)
	}
	if r := Ratios([]float64{1, 2}, []float64{4}); !sameFloats(r, []float64{0.25, nan}) {
		t.Errorf("ratios with a short reference %v", r)
	}
	if n := Count([]float64{nan, 0, 1, nan}); n != 2 {
		t.Errorf("Count = %d", n)
	}
}

func TestFormats(t *testing.T) {
	for _, c := range []struct {
		v        float64
		fig, rat string
	}{
		{math.NaN(), "–", "–"}, {0.12345, "0.123", "0.12"}, {9.9994, "9.999", "10.00"}, {10, "10.0", "10.00"},
		{99.94, "99.9", "99.94"}, {100, "100", "100.00"}, {1234567, "1234567", "1234567.00"}, {-12.34, "-12.3", "-12.34"},
	} {
		if f, r := Fig(c.v), RatioFig(c.v); f != c.fig || r != c.rat {
			t.Errorf("%v: Fig %q RatioFig %q, want %q and %q", c.v, f, r, c.fig, c.rat)
		}
	}
}

func TestItersFor(t *testing.T) {
	for _, c := range []struct {
		base, floor int
		bytes       int64
		want        int
	}{
		{5000, 30, 8, 5000}, {5000, 30, 4096, 5000}, {5000, 30, 8192, 2500}, {5000, 30, 4 << 20, 30}, {10, 30, 8, 30},
	} {
		if got := ItersFor(c.base, c.floor, c.bytes); got != c.want {
			t.Errorf("ItersFor(%d, %d, %d) = %d, want %d", c.base, c.floor, c.bytes, got, c.want)
		}
	}
	for n, want := range map[int]int{0: 1, 9: 1, 10: 1, 25: 2, 1000: 100} {
		if got := WarmupFor(n); got != want {
			t.Errorf("WarmupFor(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestList(t *testing.T) {
	if got := List(" a,,b , c,"); strings.Join(got, "|") != "a|b|c" {
		t.Errorf("List = %q", got)
	}
	if got := List(" , "); got != nil {
		t.Errorf("List of nothing = %q", got)
	}
}

// TestCLI: the common flags parse; every bad command line is an ErrUsage
// error (exit status 2), checked in a fixed order: arguments left over,
// the tool's own checks, -timeout.
func TestCLI(t *testing.T) {
	newCLI := func() *CLI { return NewCLI("tool", "internal role", time.Minute, io.Discard) }
	c := newCLI()
	extra := c.String("extra", "x", "a tool's own flag")
	if err := c.Parse([]string{"-reps", "3", "-json", "-fabrun", "/f", "-extra", "y", "-role", "r", "a1"}); err != nil {
		t.Fatal(err)
	}
	if c.Reps != 3 || !c.JSON || c.Fabrun != "/f" || c.Timeout != time.Minute || c.Role != "r" || *extra != "y" || c.NArg() != 1 {
		t.Errorf("parsed %+v extra %q", c, *extra)
	}
	if err := newCLI().Parse([]string{"-reps", "x"}); !errors.Is(err, ErrUsage) || ExitCode(err) != 2 {
		t.Errorf("bad flag: %v", err)
	}
	ok := func() error { return nil }
	bad := func() error { return errors.New("tool's own check") }
	for _, tc := range []struct {
		args  []string
		check func() error
		want  string // in the error; "" for none
	}{
		{nil, ok, ""},
		{[]string{"stray"}, bad, "unexpected arguments"},
		{[]string{"-timeout", "0s"}, bad, "tool's own check"},
		{[]string{"-timeout", "0s"}, ok, "-timeout 0s: want > 0"},
	} {
		c := newCLI()
		if err := c.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := c.Check(tc.check)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (!errors.Is(err, ErrUsage) || !strings.Contains(fmt.Sprint(err), tc.want)):
			t.Errorf("%v: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
	if ExitCode(nil) != 0 || ExitCode(errors.New("job failed")) != 1 || ExitCode(fmt.Errorf("x: %w", ErrUsage)) != 2 {
		t.Error("ExitCode")
	}
}

// TestOutput: the tables on stdout; with -json the records on stdout and
// the tables on stderr.
func TestOutput(t *testing.T) {
	print := func(w io.Writer) { fmt.Fprintln(w, "TABLE") }
	records := func() []benchrec.Record {
		return []benchrec.Record{{Tool: "t", Area: "a", Case: "c", Metric: "m", Value: 1, Unit: "us", Reps: 1, Stat: "median"}}
	}
	var o, e bytes.Buffer
	if err := Output(false, &o, &e, print, records); err != nil || o.String() != "TABLE\n" || e.Len() != 0 {
		t.Errorf("tables: %v %q %q", err, &o, &e)
	}
	o.Reset()
	if err := Output(true, &o, &e, print, records); err != nil || e.String() != "TABLE\n" || !strings.HasPrefix(o.String(), `{"tool":"t"`) {
		t.Errorf("json: %v %q %q", err, &o, &e)
	}
}
