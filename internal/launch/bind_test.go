package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
)

func TestBindSets(t *testing.T) {
	cpus := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = 2 * i // not 0..n-1: the sets are taken from the list
		}
		return s
	}
	for _, c := range []struct {
		mode string
		n, c int
		want [][]int
	}{
		{BindAuto, 2, 2, [][]int{{0}, {2}}},
		{BindAuto, 3, 8, [][]int{{0, 2}, {4, 6, 8}, {10, 12, 14}}},
		{BindAuto, 1, 8, nil}, // one rank: all of fabrun's CPUs
		{BindAuto, 3, 2, nil}, // more ranks than CPUs: the kernel balances
		{BindCore, 1, 4, [][]int{{0}}},
		{BindCore, 3, 4, [][]int{{0}, {2}, {4}}},
		{BindNone, 2, 4, nil},
	} {
		got, err := bindSets(c.mode, c.n, cpus(c.c))
		if err != nil || !slices.EqualFunc(got, c.want, slices.Equal[[]int]) || (got == nil) != (c.want == nil) {
			t.Errorf("bindSets(%s, %d ranks, %d CPUs) = %v, %v; want %v", c.mode, c.n, c.c, got, err, c.want)
		}
	}
	if _, err := bindSets(BindCore, 5, cpus(4)); !errors.Is(err, ErrUsage) {
		t.Errorf("5 ranks bound to 4 CPUs one each: %v, want ErrUsage", err)
	}
	for _, m := range []string{"", "auto", "core", "none"} {
		if _, err := checkBind(m); err != nil {
			t.Errorf("checkBind(%q): %v", m, err)
		}
	}
	if _, err := checkBind("socket"); !errors.Is(err, ErrUsage) {
		t.Errorf("checkBind(socket): %v, want ErrUsage", err)
	}
	if got := cpuList([]int{0, 1, 2, 3, 6, 8, 9}); got != "0-3,6,8-9" {
		t.Errorf("cpuList = %q", got)
	}
}

// TestBindLocalRanks runs ranks that print the CPUs they may use and the
// node's CPU count fabrun passes them: under auto and core each rank has
// its own CPUs, disjoint from the others', when the ranks fit; under none
// every rank has all of this process's.
func TestBindLocalRanks(t *testing.T) {
	all, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	np := min(len(all), 3)
	for _, mode := range []string{BindAuto, BindCore, BindNone} {
		var out, errb proctest.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := Run(ctx, Config{
			NP: np, Bind: mode, Stdout: &out, Stderr: &errb,
			Argv: []string{"sh", "-c", `echo "$PMI_RANK $WEFT_NODE_CPUS $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"`},
		})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", mode, err, out.String(), errb.String())
		}
		seen := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				t.Fatalf("%s: bad line %q", mode, line)
			}
			if f[1] != strconv.Itoa(len(all)) {
				t.Errorf("%s: rank %s has WEFT_NODE_CPUS=%s, want %d", mode, f[0], f[1], len(all))
			}
			seen[f[2]]++
		}
		bound := mode == BindCore || mode == BindAuto && np >= 2
		switch {
		case bound && len(seen) != np:
			t.Errorf("%s: %d ranks on %d CPUs share CPU sets: %v", mode, np, len(all), seen)
		case !bound && (len(seen) != 1 || seen[cpuList(all)] != np):
			t.Errorf("%s: ranks not on all of %s: %v", mode, cpuList(all), seen)
		}
		t.Logf("%s, %d ranks: %v", mode, np, fmt.Sprint(seen))
	}
}

func TestShareProcs(t *testing.T) {
	for _, c := range []struct {
		mode string
		n, c int
		env  []string
		want string
	}{
		{BindAuto, 4, 2, nil, "GOMAXPROCS=1"},
		{BindAuto, 3, 2, []string{"HOME=/root"}, "GOMAXPROCS=1"},
		{BindAuto, 2, 2, nil, ""},                                   // bound: the CPU sets size the runtime
		{BindAuto, 1, 1, nil, ""},                                   // alone
		{BindAuto, 4, 2, []string{"GOMAXPROCS=2"}, ""},              // the user's choice stands
		{BindNone, 4, 2, nil, ""},                                   // no CPU management asked for
		{BindCore, 2, 4, nil, ""},                                   // bound
		{BindAuto, 4, 0, nil, ""},                                   // no CPUs known
		{BindAuto, 5, 2, []string{"XGOMAXPROCS=3"}, "GOMAXPROCS=1"}, // another variable
	} {
		if got := shareProcs(c.mode, c.n, c.c, c.env); got != c.want {
			t.Errorf("shareProcs(%s, %d ranks, %d CPUs, %q) = %q, want %q", c.mode, c.n, c.c, c.env, got, c.want)
		}
	}
}

// TestOversubscribedProcs runs more ranks than CPUs: under auto each rank
// gets GOMAXPROCS=1, under none it gets nothing, and a GOMAXPROCS the
// job's environment sets reaches every rank unchanged.
func TestOversubscribedProcs(t *testing.T) {
	all, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	np := len(all) + 1
	for _, c := range []struct {
		mode string
		env  []string
		want string
	}{
		{BindAuto, nil, "1"},
		{BindNone, nil, "-"},
		{BindAuto, []string{"GOMAXPROCS=3"}, "3"},
	} {
		var out, errb proctest.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := Run(ctx, Config{
			NP: np, Bind: c.mode, Env: c.env, Stdout: &out, Stderr: &errb,
			Argv: []string{"sh", "-c", `echo "$PMI_RANK ${GOMAXPROCS:--}"`},
		})
		cancel()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s%s", c.mode, c.env, err, out.String(), errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != np {
			t.Fatalf("%s %v: %d lines from %d ranks: %q", c.mode, c.env, len(lines), np, out.String())
		}
		for _, line := range lines {
			if f := strings.Fields(line); len(f) != 2 || f[1] != c.want {
				t.Errorf("%s %v: rank line %q, want GOMAXPROCS %s", c.mode, c.env, line, c.want)
			}
		}
	}
}
