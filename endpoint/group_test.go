package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
)

// groupBattery checks groups and the communicators made from them on c,
// a communicator of 4 ranks; perProc is how many of them share each
// process (SplitProcess's size).
func groupBattery(ctx context.Context, c *endpoint.Comm, perProc int) error {
	if c.Size() != 4 {
		return fmt.Errorf("battery wants 4 ranks, has %d", c.Size())
	}
	me := c.Rank()
	g := c.Group()
	if g.Size() != 4 || g.Rank() != me {
		return fmt.Errorf("Group: size %d rank %d, want 4 and %d", g.Size(), g.Rank(), me)
	}
	even, err := g.Incl(0, 2)
	if err != nil {
		return err
	}
	odd, err := g.Excl(0, 2)
	if err != nil {
		return err
	}
	wantIn := func(name string, x *endpoint.Group, rank int) error {
		if x.Rank() != rank {
			return fmt.Errorf("%s: rank %d, want %d", name, x.Rank(), rank)
		}
		return nil
	}
	inEven, inOdd := endpoint.Undefined, endpoint.Undefined
	if me%2 == 0 {
		inEven = me / 2
	} else {
		inOdd = me / 2
	}
	if err := errors.Join(wantIn("even", even, inEven), wantIn("odd", odd, inOdd)); err != nil {
		return err
	}
	u := even.Union(odd)
	if got, _ := u.TranslateRanks([]int{0, 1, 2, 3}, g); !slices.Equal(got, []int{0, 2, 1, 3}) {
		return fmt.Errorf("union of even and odd in g's ranks: %v", got)
	}
	for _, tc := range []struct {
		name string
		a, b *endpoint.Group
		want endpoint.Relation
	}{
		{"union", u, g, endpoint.Similar},
		{"intersection", g.Intersection(even), even, endpoint.Ident},
		{"difference", g.Difference(even), odd, endpoint.Ident},
		{"disjoint", even.Intersection(odd), nil, endpoint.Ident},
		{"subset", even, g, endpoint.Unequal},
	} {
		if r := tc.a.Compare(tc.b); r != tc.want {
			return fmt.Errorf("%s: compare %v, want %v", tc.name, r, tc.want)
		}
	}
	if got, err := g.TranslateRanks([]int{3, 2, endpoint.ProcNull}, odd); err != nil || !slices.Equal(got, []int{1, endpoint.Undefined, endpoint.ProcNull}) {
		return fmt.Errorf("translate g → odd: %v %v", got, err)
	}
	for name, f := range map[string]func() error{
		"incl out of range": func() error { _, err := g.Incl(4); return err },
		"incl twice":        func() error { _, err := g.Incl(1, 1); return err },
		"excl negative":     func() error { _, err := even.Excl(-1); return err },
		"translate":         func() error { _, err := even.TranslateRanks([]int{2}, g); return err },
		"group tag":         func() error { _, err := c.CreateGroup(ctx, g, endpoint.MaxGroupTag+1); return err },
	} {
		if err := f(); !errors.Is(err, endpoint.ErrInvalid) {
			return fmt.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}

	// Create, reversed: every rank takes part, ranks are renumbered.
	rev, err := g.Incl(3, 2, 1, 0)
	if err != nil {
		return err
	}
	cr, err := c.Create(ctx, rev)
	if err != nil {
		return fmt.Errorf("create reversed: %w", err)
	}
	defer cr.Free()
	if cr.Size() != 4 || cr.Rank() != 3-me || cr.Compare(c) != endpoint.Similar || cr.ContextID() == c.ContextID() {
		return fmt.Errorf("reversed: rank %d of %d, %v to its parent, context %d", cr.Rank(), cr.Size(), cr.Compare(c), cr.ContextID())
	}
	if got, _ := cr.Group().TranslateRanks([]int{0}, g); got[0] != 3 {
		return fmt.Errorf("reversed rank 0 is parent rank %d", got[0])
	}
	if err := ringCheck(ctx, cr, 11); err != nil {
		return fmt.Errorf("reversed: %w", err)
	}
	// Create of a subset: the others get nil.
	ce, err := c.Create(ctx, even)
	if err != nil {
		return fmt.Errorf("create even: %w", err)
	}
	if (ce != nil) != (me%2 == 0) {
		return fmt.Errorf("create even: got %v on rank %d", ce, me)
	}
	if ce != nil {
		if ce.Size() != 2 || ce.Rank() != me/2 {
			return fmt.Errorf("even: rank %d of %d", ce.Rank(), ce.Size())
		}
		if err := ringCheck(ctx, ce, 12); err != nil {
			return fmt.Errorf("even: %w", err)
		}
		ce.Free()
	}
	// Ranks that pass different groups all fail, none waits.
	bad := g
	if me == 0 {
		bad = rev
	}
	if x, err := c.Create(ctx, bad); !errors.Is(err, endpoint.ErrInvalid) || x != nil {
		return fmt.Errorf("create with different groups: %v %v", x, err)
	}
	// A group with a rank the communicator lacks (only when it has one).
	if ce, err := c.Create(ctx, even); err != nil {
		return err
	} else if ce != nil {
		_, err := ce.CreateGroup(ctx, g, 1)
		if !errors.Is(err, endpoint.ErrInvalid) {
			return fmt.Errorf("CreateGroup with ranks outside the communicator: %v", err)
		}
		ce.Free()
	}

	// CreateGroup: the even and the odd ranks at once, each pair alone,
	// with the same tag (disjoint groups); then a group of three.
	mine := even
	if me%2 == 1 {
		mine = odd
	}
	cg, err := c.CreateGroup(ctx, mine, 3)
	if err != nil {
		return fmt.Errorf("create group: %w", err)
	}
	if cg.Size() != 2 || cg.Rank() != me/2 || cg.Group().Compare(mine) != endpoint.Ident {
		return fmt.Errorf("create group: rank %d of %d", cg.Rank(), cg.Size())
	}
	if err := ringCheck(ctx, cg, 13); err != nil {
		return fmt.Errorf("create group: %w", err)
	}
	cg.Free()
	three, _ := g.Incl(1, 2, 3)
	if me == 0 {
		if _, err := c.CreateGroup(ctx, three, 4); !errors.Is(err, endpoint.ErrInvalid) {
			return fmt.Errorf("create group by a non-member: %v", err)
		}
	} else {
		c3, err := c.CreateGroup(ctx, three, 4)
		if err != nil {
			return fmt.Errorf("create group of three: %w", err)
		}
		all, err := c3.Allgather(ctx, []byte{byte(me)})
		if err != nil {
			return err
		}
		for r, b := range all {
			if int(b[0]) != r+1 {
				return fmt.Errorf("group of three: allgather %v", all)
			}
		}
		c3.Free()
	}

	// SplitType.
	node, err := c.SplitType(ctx, endpoint.SplitNode, -me)
	if err != nil {
		return err
	}
	if node.Size() != 4 || node.Rank() != 3-me {
		return fmt.Errorf("split node: rank %d of %d", node.Rank(), node.Size())
	}
	node.Free()
	proc, err := c.SplitType(ctx, endpoint.SplitProcess, 0)
	if err != nil {
		return err
	}
	if proc.Size() != perProc || proc.Rank() != me%perProc {
		return fmt.Errorf("split process: rank %d of %d, want %d of %d", proc.Rank(), proc.Size(), me%perProc, perProc)
	}
	if err := proc.Barrier(ctx); err != nil {
		return err
	}
	proc.Free()
	if _, err := c.SplitType(ctx, 7, 0); !errors.Is(err, endpoint.ErrInvalid) {
		return fmt.Errorf("split type 7: %v", err)
	}
	d, err := c.Dup(ctx)
	if err != nil {
		return err
	}
	defer d.Free()
	if r := d.Compare(c); r != endpoint.Congruent || c.Compare(c) != endpoint.Ident {
		return fmt.Errorf("dup: %v, self %v", r, c.Compare(c))
	}
	return c.Barrier(ctx)
}

// singletonHandles makes this test's process a job of one rank and
// returns n private handles of it (closed with the test) and a context of
// 30 s.
func singletonHandles(t *testing.T, n int) (context.Context, []*endpoint.Comm) {
	t.Helper()
	singleton(t)
	ctx := eptest.Ctx(t, 30*time.Second)
	w, err := endpoint.Init(ctx)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	eps, err := w.Comm().CreateEndpoints(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, eps
}

// ringCheck sends each rank's number to the next rank of c with tag and
// checks what arrives from the previous one.
func ringCheck(ctx context.Context, c *endpoint.Comm, tag int) error {
	n, me := c.Size(), c.Rank()
	got := make([]byte, 2)
	r, err := c.Irecv(got, (me+n-1)%n, tag)
	if err != nil {
		return err
	}
	if err := c.Send(ctx, []byte{byte(me), byte(n)}, (me+1)%n, tag); err != nil {
		return err
	}
	if _, err := r.Wait(ctx); err != nil {
		return err
	}
	if int(got[0]) != (me+n-1)%n || int(got[1]) != n {
		return fmt.Errorf("ring on %d ranks: rank %d got %v", n, me, got)
	}
	return nil
}

// TestGroups runs the group battery on 4 processes.
func TestGroups(t *testing.T) {
	for _, p := range providers {
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 4, p, 60*time.Second) {
				return
			}
			w := initWorld(t)
			ctx := eptest.Ctx(t, 30*time.Second)
			world := w.Comm()
			if err := groupBattery(ctx, world, 1); err != nil {
				t.Fatalf("rank %d: %v", world.Rank(), err)
			}
			// Endpoints are ranks of their own: two per process, none a
			// world rank, each process's pair split apart.
			eps, err := world.CreateEndpoints(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			runHandles(t, ctx, eps, func(ctx context.Context, e *endpoint.Comm) error {
				defer e.Free()
				if x := e.Group().Intersection(world.Group()); x.Size() != 0 {
					return fmt.Errorf("endpoints share %d identities with world ranks", x.Size())
				}
				proc, err := e.SplitType(ctx, endpoint.SplitProcess, 0)
				if err != nil {
					return err
				}
				defer proc.Free()
				if proc.Size() != 2 || proc.Rank() != e.Rank()%2 {
					return fmt.Errorf("split process of endpoints: rank %d of %d", proc.Rank(), proc.Size())
				}
				// The process's pair, made by the pair alone; its group
				// translated back to e's ranks.
				pair, err := e.CreateGroup(ctx, proc.Group(), 9)
				if err != nil {
					return err
				}
				defer pair.Free()
				got, _ := pair.Group().TranslateRanks([]int{0, 1}, e.Group())
				if base := e.Rank() &^ 1; !slices.Equal(got, []int{base, base + 1}) {
					return fmt.Errorf("pair of rank %d is %v in e", e.Rank(), got)
				}
				return ringCheck(ctx, pair, 2)
			})
		})
	}
}

// TestGroupsHandles runs the group battery on the handles of one
// process, each driven by its own goroutine, and makes overlapping groups
// at the same time with different tags.
func TestGroupsHandles(t *testing.T) {
	ctx, eps := singletonHandles(t, 4)
	runHandles(t, ctx, eps, func(ctx context.Context, e *endpoint.Comm) error {
		if err := groupBattery(ctx, e, 4); err != nil {
			return err
		}
		// Ranks 1 and 2 are in both {0,1,2} and {1,2,3}: rank 3 starts
		// the second while they are in the first, and the tags keep its
		// messages out of the first.
		g := e.Group()
		lo, _ := g.Incl(0, 1, 2)
		hi, _ := g.Incl(1, 2, 3)
		tags := map[*endpoint.Group]int{lo: 20, hi: 21}
		for _, x := range []*endpoint.Group{lo, hi} {
			if x.Rank() == endpoint.Undefined {
				continue
			}
			n, err := e.CreateGroup(ctx, x, tags[x])
			if err != nil {
				return err
			}
			if n.Size() != 3 || n.Rank() != x.Rank() {
				return fmt.Errorf("overlapping group: rank %d of %d, want %d", n.Rank(), n.Size(), x.Rank())
			}
			n.Free()
		}
		return e.Free()
	})
}

// ExampleComm_CreateGroup makes a communicator of the even ranks of four
// handles, by those ranks alone, and translates its ranks back.
func ExampleComm_CreateGroup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	eps, err := w.Comm().CreateEndpoints(ctx, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	out := make([]string, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ep.Free()
			all := ep.Group()
			even, _ := all.Incl(0, 2)
			if even.Rank() == endpoint.Undefined {
				out[i] = fmt.Sprintf("rank %d: not in the group", ep.Rank())
				return // the odd ranks take no part
			}
			sub, err := ep.CreateGroup(ctx, even, 0)
			if err != nil {
				out[i] = err.Error()
				return
			}
			defer sub.Free()
			back, _ := sub.Group().TranslateRanks([]int{0, 1}, all)
			out[i] = fmt.Sprintf("rank %d: rank %d of %d, whose ranks are %v of the handles", ep.Rank(), sub.Rank(), sub.Size(), back)
		}()
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// rank 0: rank 0 of 2, whose ranks are [0 2] of the handles
	// rank 1: not in the group
	// rank 2: rank 1 of 2, whose ranks are [0 2] of the handles
	// rank 3: not in the group
}
