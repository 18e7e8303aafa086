package collectives_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/internal/eptest"
)

// TestTuneTable: a short tuning run over 3 handles gives every rank the
// same table, whose text form round-trips through the file loader, and a
// handle made with it (WithTable, or WEFT_COLL_TABLE naming the file)
// picks, at every measured size, the algorithm measured fastest there.
func TestTuneTable(t *testing.T) {
	const p = 3
	cfg := C.TuneConfig{
		Collectives: []C.Collective{C.CollAllreduce, C.CollGather, C.CollAllgather, C.CollAlltoall},
		Sizes:       []int{8, 4096, 65536},
		Iters:       3,
	}
	texts := make([]string, p)
	var measures []C.TuneMeasure
	runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, p), nil, func(ctx context.Context, c *C.Coll) error {
		tab, ms, err := C.Tune(ctx, c, cfg)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if _, err := tab.WriteTo(&b); err != nil {
			return err
		}
		texts[c.Rank()] = b.String()
		if c.Rank() == 0 {
			measures = ms
		}
		return nil
	})
	for r := 1; r < p; r++ {
		if texts[r] != texts[0] {
			t.Fatalf("rank %d's table differs from rank 0's:\n%s\n%s", r, texts[r], texts[0])
		}
	}
	t.Logf("table:\n%s", texts[0])
	if len(measures) == 0 {
		t.Fatal("no measurements")
	}
	path := filepath.Join(t.TempDir(), "coll.table")
	if err := os.WriteFile(path, []byte(texts[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	tab, err := C.LoadTable(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := tab.WriteTo(&b); err != nil || b.String() != texts[0] {
		t.Fatalf("reloaded table differs (%v):\n%s", err, b.String())
	}
	// per collective and size: the chosen algorithm, the fastest, unless
	// it is not 10% faster than the default choice
	type ks struct {
		k    C.Collective
		size int
	}
	chosen, fastest := map[ks]C.TuneMeasure{}, map[ks]C.TuneMeasure{}
	for _, m := range measures {
		key := ks{m.Collective, m.Selection}
		if m.Chosen {
			if _, dup := chosen[key]; dup {
				t.Fatalf("%s at %d B: two chosen", key.k, key.size)
			}
			chosen[key] = m
		}
		if f, ok := fastest[key]; !ok || m.Time < f.Time {
			fastest[key] = m
		}
	}
	for key, f := range fastest {
		m, ok := chosen[key]
		if !ok {
			t.Fatalf("%s at %d B: none chosen", key.k, key.size)
		}
		if m.Algorithm != f.Algorithm && float64(f.Time) < 0.9*float64(m.Time) {
			t.Errorf("%s at %d B: chose %s (%v) over %s (%v), more than 10%% faster", key.k, key.size, m.Algorithm, m.Time, f.Algorithm, f.Time)
		}
	}
	check := func(ctx context.Context, c *C.Coll) error {
		for key, m := range chosen {
			if got := c.Algorithm(key.k, key.size); got != m.Algorithm {
				return fmt.Errorf("%s at %d B: %s, the table chose %s", key.k, key.size, got, m.Algorithm)
			}
		}
		return nil
	}
	runHandles(t, eptest.Ctx(t, 30*time.Second), handles(t, p), []C.Option{C.WithTable(tab)}, check)
	t.Setenv(C.EnvTable, path)
	runHandles(t, eptest.Ctx(t, 30*time.Second), handles(t, p), nil, check)
}

// TestTableSelection: a table changes the selection from the thresholds'
// for the communicator sizes it covers only, the collectives then run
// (and give the right result) with the table's algorithm, and a forced
// algorithm or an explicit threshold still wins.
func TestTableSelection(t *testing.T) {
	tab, err := C.ParseTable(strings.NewReader(`weft-colltable 1
# a comment
allreduce 2 0 ring 1k recdbl   # ring below 1 KiB
alltoall 2 0 pairwise
bcast 3 0 linear
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := tab.Rule(C.CollAllreduce, 2); len(got) != 2 || got[1] != (C.TableStep{From: 1024, Algorithm: C.RecursiveDoubling}) {
		t.Fatalf("allreduce rule %v", got)
	}
	runHandles(t, eptest.Ctx(t, 30*time.Second), handles(t, 2), []C.Option{C.WithTable(tab)}, func(ctx context.Context, c *C.Coll) error {
		for _, w := range []struct {
			k    C.Collective
			n    int
			want C.Algorithm
		}{
			{C.CollAllreduce, 8, C.Ring}, {C.CollAllreduce, 1023, C.Ring}, {C.CollAllreduce, 1024, C.RecursiveDoubling},
			{C.CollAllreduce, 1 << 20, C.RecursiveDoubling},                // the default would be Rabenseifner
			{C.CollAlltoall, 8, C.Pairwise}, {C.CollGather, 8, C.Binomial}, // no rule: the thresholds
		} {
			if got := c.Algorithm(w.k, w.n); got != w.want {
				return fmt.Errorf("%s at %d B: %s, want %s", w.k, w.n, got, w.want)
			}
		}
		x := []float64{float64(c.Rank() + 1)}
		if err := C.Allreduce(ctx, c, nil, x, C.Sum[float64]()); err != nil || x[0] != 3 {
			return fmt.Errorf("Allreduce under the table: %v, %v", x, err)
		}
		return nil
	})
	runHandles(t, eptest.Ctx(t, 30*time.Second), handles(t, 3), []C.Option{C.WithTable(tab)}, func(ctx context.Context, c *C.Coll) error {
		if got := c.Algorithm(C.CollAllreduce, 8); got != C.RecursiveDoubling {
			return fmt.Errorf("3 ranks, allreduce rule only for 2: %s", got)
		}
		if got := c.Algorithm(C.CollBcast, 8); got != C.Linear {
			return fmt.Errorf("3 ranks, bcast: %s, want linear", got)
		}
		return nil
	})
	runHandles(t, eptest.Ctx(t, 30*time.Second), handles(t, 2), []C.Option{C.WithTable(tab),
		C.WithAlgorithm(C.CollAlltoall, C.Linear), C.WithThreshold(C.CollAllreduce, 16)}, func(ctx context.Context, c *C.Coll) error {
		if got := c.Algorithm(C.CollAlltoall, 8); got != C.Linear {
			return fmt.Errorf("forced alltoall: %s", got)
		}
		if got := c.Algorithm(C.CollAllreduce, 8); got != C.RecursiveDoubling {
			return fmt.Errorf("explicit threshold, allreduce at 8 B: %s", got)
		}
		return nil
	})
}

// TestTableErrors: a table that does not parse, or a file that cannot be
// read, is an error wrapping ErrInvalid that says where; New refuses a
// bad WEFT_COLL_TABLE.
func TestTableErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"", "empty"},
		{"allreduce 2 0 ring\n", "line 1"},
		{"weft-colltable 2\n", "line 1"},
		{"weft-colltable 1\nallreduce 2 0 bruck\n", "no algorithm"},
		{"weft-colltable 1\nfoo 2 0 ring\n", "unknown collective"},
		{"weft-colltable 1\nallreduce 2 8 ring\n", "start at 0"},
		{"weft-colltable 1\nallreduce 2 0 ring 0 recdbl\n", "not increasing"},
		{"weft-colltable 1\nallreduce two 0 ring\n", "ranks"},
		{"weft-colltable 1\nallreduce 2 0\n", "line 2"},
		{"weft-colltable 1\nallreduce 2 0 ring -5 recdbl\n", "size"},
	} {
		_, err := C.ParseTable(strings.NewReader(tc.text))
		if !errors.Is(err, C.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want ErrInvalid saying %q", tc.text, err, tc.want)
		}
	}
	dir := t.TempDir()
	if _, err := C.LoadTable(filepath.Join(dir, "absent")); !errors.Is(err, C.ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("weft-colltable 1\nscan 2 0 ring\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(C.EnvTable, bad)
	_, err := C.New(eptest.Ctx(t, 10*time.Second), handles(t, 1)[0])
	if !errors.Is(err, C.ErrInvalid) || !strings.Contains(err.Error(), C.EnvTable) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("New with a bad %s: %v", C.EnvTable, err)
	}
}

// TestDefaultSelection: without a table or settings, the thresholds of
// docs/collectives.md pick: recursive doubling below 32 KiB and
// Rabenseifner from it for Allreduce; for Reduce the binomial tree at
// every size on two ranks and the reduce-scatter and gather from 64 KiB
// on more; for Allgather recursive doubling on a power of two ranks and
// Bruck's otherwise below a 64 KiB result, the ring from it; for
// Alltoall Bruck's for blocks of up to 256 B on 8 ranks or more spread
// over several nodes, the linear exchange below 16 KiB blocks, pairwise
// from it.
func TestDefaultSelection(t *testing.T) {
	for _, p := range []int{2, 3, 4, 8} {
		runHandles(t, eptest.Ctx(t, 30*time.Second), handles(t, p), nil, func(ctx context.Context, c *C.Coll) error {
			C.SetCrowded(c, false)
			large := C.ReduceScatterGather
			if p == 2 {
				large = C.Binomial
			}
			small := C.RecursiveDoubling
			if p == 3 {
				small = C.Bruck
			}
			tiny := C.Linear
			if p == 8 {
				if got := c.Algorithm(C.CollAlltoall, 8); got != C.Linear {
					return fmt.Errorf("%d ranks of one node: alltoall at 8 B: %s, want linear", p, got)
				}
				C.SetSpread(c, true)
				tiny = C.Bruck
			}
			for _, w := range []struct {
				k    C.Collective
				n    int
				want C.Algorithm
			}{
				{C.CollAllreduce, 8, C.RecursiveDoubling}, {C.CollAllreduce, 16 << 10, C.RecursiveDoubling},
				{C.CollAllreduce, 32 << 10, C.Rabenseifner}, {C.CollAllreduce, 1 << 20, C.Rabenseifner},
				{C.CollReduce, 8, C.Binomial}, {C.CollReduce, 64<<10 - 1, C.Binomial},
				{C.CollReduce, 64 << 10, large}, {C.CollReduce, 1 << 20, large},
				{C.CollAllgather, 8, small}, {C.CollAllgather, 64<<10 - 1, small}, {C.CollAllgather, 64 << 10, C.Ring},
				{C.CollAlltoall, 8, tiny}, {C.CollAlltoall, 256, tiny}, {C.CollAlltoall, 257, C.Linear},
				{C.CollAlltoall, 16 << 10, C.Pairwise},
			} {
				if got := c.Algorithm(w.k, w.n); got != w.want {
					return fmt.Errorf("%d ranks: %s at %d B: %s, want %s", p, w.k, w.n, got, w.want)
				}
			}
			return nil
		})
	}
}

// TestAlltoallCrowded: on a crowded machine the default rule's pairwise
// Alltoall becomes the linear exchange, unless an algorithm was chosen;
// handles that judge their machine differently still exchange their
// blocks right (each rank's pick is its own).
func TestAlltoallCrowded(t *testing.T) {
	eps := handles(t, 4)
	ctx := eptest.Ctx(t, 30*time.Second)
	// Flat (no hierarchy), so that the handles' messages take the
	// algorithm.
	runHandles(t, ctx, eps, []C.Option{C.WithHierarchy(C.HierOff)}, func(ctx context.Context, c *C.Coll) error {
		for _, crowded := range []bool{false, true} {
			C.SetCrowded(c, crowded)
			want := C.Pairwise
			if crowded {
				want = C.Linear
			}
			for _, nb := range []int{16 << 10, 1 << 20} {
				if got := c.Algorithm(C.CollAlltoall, nb); got != want {
					return fmt.Errorf("crowded %v, %d B: %s, want %s", crowded, nb, got, want)
				}
			}
			if got := c.Algorithm(C.CollAlltoall, 8<<10); got != C.Linear {
				return fmt.Errorf("crowded %v, 8 KiB: %s, want linear", crowded, got)
			}
		}
		// Half the handles crowded: linear and pairwise ranks in one call.
		C.SetCrowded(c, c.Rank()%2 == 0)
		const n = 16 << 10 / 8
		send := make([]float64, 4*n)
		for i := range send {
			send[i] = float64(1000*c.Rank() + i)
		}
		recv := make([]float64, 4*n)
		if err := C.Alltoall(ctx, c, send, recv); err != nil {
			return err
		}
		for r := 0; r < 4; r++ {
			for i := 0; i < n; i++ {
				if want := float64(1000*r + c.Rank()*n + i); recv[r*n+i] != want {
					return fmt.Errorf("rank %d: block from %d, element %d: %v, want %v", c.Rank(), r, i, recv[r*n+i], want)
				}
			}
		}
		return nil
	})
	// A chosen algorithm holds on a crowded machine.
	runHandles(t, ctx, eps, []C.Option{C.WithAlgorithm(C.CollAlltoall, C.Pairwise)}, func(ctx context.Context, c *C.Coll) error {
		C.SetCrowded(c, true)
		if got := c.Algorithm(C.CollAlltoall, 8); got != C.Pairwise {
			return fmt.Errorf("WithAlgorithm(pairwise) on a crowded machine: %s", got)
		}
		return nil
	})
}
