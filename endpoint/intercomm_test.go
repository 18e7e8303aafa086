package endpoint_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
)

// interBattery joins the even and the odd ranks of c (4 ranks) into an
// intercommunicator and checks it: sizes, groups, point-to-point between
// the groups named by remote ranks, the calls it refuses, and Merge both
// ways.
func interBattery(ctx context.Context, c *endpoint.Comm) error {
	me := c.Rank()
	local, err := c.Split(ctx, me%2, me)
	if err != nil {
		return err
	}
	defer local.Free()
	for name, f := range map[string]func() error{
		"leader out of range": func() error { _, err := local.IntercommCreate(ctx, 2, c, 1-me%2, 0); return err },
		"tag out of range":    func() error { _, err := local.IntercommCreate(ctx, 0, c, 1-me%2, endpoint.MaxInterTag+1); return err },
	} {
		if err := f(); !errors.Is(err, endpoint.ErrInvalid) {
			return fmt.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// The leaders are c's ranks 0 (evens) and 1 (odds).
	ic, err := local.IntercommCreate(ctx, 0, c, 1-me%2, 7)
	if err != nil {
		return err
	}
	defer ic.Free()
	if !ic.IsInter() || local.IsInter() || ic.Rank() != me/2 || ic.Size() != 2 || ic.RemoteSize() != 2 || local.RemoteSize() != 0 {
		return fmt.Errorf("intercomm: rank %d size %d remote %d", ic.Rank(), ic.Size(), ic.RemoteSize())
	}
	if r := ic.Group().Compare(local.Group()); r != endpoint.Ident {
		return fmt.Errorf("intercomm's local group: %v", r)
	}
	want := []int{1, 3}
	if me%2 == 1 {
		want = []int{0, 2}
	}
	if got, _ := ic.RemoteGroup().TranslateRanks([]int{0, 1}, c.Group()); !slices.Equal(got, want) {
		return fmt.Errorf("remote group in c's ranks: %v, want %v", got, want)
	}
	// Each rank sends its rank in c to the remote rank of its own local
	// rank, and takes one message from any remote rank.
	buf := make([]byte, 8)
	r, err := ic.Irecv(buf, endpoint.AnySource, 5)
	if err != nil {
		return err
	}
	if err := ic.Send(ctx, binary.LittleEndian.AppendUint64(nil, uint64(me)), ic.Rank(), 5); err != nil {
		return err
	}
	st, err := r.Wait(ctx)
	if err != nil {
		return err
	}
	if got := int(binary.LittleEndian.Uint64(buf)); st.Source != ic.Rank() || got != want[st.Source] {
		return fmt.Errorf("from remote rank %d: %d, want %d", st.Source, got, want[ic.Rank()])
	}
	// A typed exchange and a partitioned message across the groups.
	col, err := ddt.Vector(4, 1, 2, ddt.Int32)
	if err != nil {
		return err
	}
	if err := col.Commit(); err != nil {
		return err
	}
	sv := []int32{int32(me), -1, int32(me) + 10, -1, int32(me) + 20, -1, int32(me) + 30, -1}
	rv := make([]int32, 4)
	if _, err := ic.Sendrecv(ctx, endpoint.AsBytes(sv), 1, col, ic.Rank(), 6, endpoint.AsBytes(rv), 4, ddt.Int32, ic.Rank(), 6); err != nil {
		return fmt.Errorf("typed sendrecv: %w", err)
	}
	if p := int32(want[ic.Rank()]); !slices.Equal(rv, []int32{p, p + 10, p + 20, p + 30}) {
		return fmt.Errorf("typed sendrecv across the groups: %v", rv)
	}
	pbuf := []byte{byte(me), byte(me), byte(me), byte(me)}
	prbuf := make([]byte, 4)
	ps, err := ic.PsendInit(pbuf, 2, ic.Rank(), 8)
	if err != nil {
		return err
	}
	pr, err := ic.PrecvInit(prbuf, 4, ic.Rank(), 8)
	if err != nil {
		return err
	}
	if err := errors.Join(pr.Start(), ps.Start(), ps.PreadyRange(0, 1), ps.Wait(ctx), pr.Wait(ctx)); err != nil {
		return fmt.Errorf("partitioned across the groups: %w", err)
	}
	if p := byte(want[ic.Rank()]); !slices.Equal(prbuf, []byte{p, p, p, p}) {
		return fmt.Errorf("partitioned across the groups: %v", prbuf)
	}
	if err := errors.Join(ps.Free(), pr.Free()); err != nil {
		return err
	}
	if err := ic.Send(ctx, nil, 2, 0); !errors.Is(err, endpoint.ErrInvalid) {
		return fmt.Errorf("send to remote rank 2 of 2: %v", err)
	}
	for name, f := range map[string]func() error{
		"Barrier":         func() error { return ic.Barrier(ctx) },
		"Dup":             func() error { _, err := ic.Dup(ctx); return err },
		"Split":           func() error { _, err := ic.Split(ctx, 0, 0); return err },
		"CreateEndpoints": func() error { _, err := ic.CreateEndpoints(ctx, 1); return err },
		"IntercommCreate": func() error { _, err := ic.IntercommCreate(ctx, 0, c, 0, 0); return err },
	} {
		if err := f(); !errors.Is(err, endpoint.ErrNotSupported) {
			return fmt.Errorf("%s on an intercommunicator: %v, want ErrNotSupported", name, err)
		}
	}
	if _, err := local.Merge(ctx, false); !errors.Is(err, endpoint.ErrInvalid) {
		return fmt.Errorf("merge of an intracommunicator: %v", err)
	}
	// Merge: the odd group high (after the evens), then both low (the
	// evens' leader has the lower identity: first again), then the evens
	// high.
	for _, tc := range []struct {
		evenHigh, oddHigh bool
		order             []int // c's ranks in merged order
	}{{false, true, []int{0, 2, 1, 3}}, {false, false, []int{0, 2, 1, 3}}, {true, false, []int{1, 3, 0, 2}}} {
		m, err := ic.Merge(ctx, me%2 == 0 && tc.evenHigh || me%2 == 1 && tc.oddHigh)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		if got, _ := m.Group().TranslateRanks([]int{0, 1, 2, 3}, c.Group()); !slices.Equal(got, tc.order) || m.Rank() != slices.Index(tc.order, me) {
			return fmt.Errorf("merged (%v/%v): ranks %v, this one %d", tc.evenHigh, tc.oddHigh, got, m.Rank())
		}
		if err := ringCheck(ctx, m, 3); err != nil {
			return fmt.Errorf("merged: %w", err)
		}
		if err := m.Barrier(ctx); err != nil {
			return err
		}
		m.Free()
	}
	return nil
}

// TestIntercomm runs the intercommunicator battery on 4 processes, and on
// two endpoints of each of 2 processes.
func TestIntercomm(t *testing.T) {
	for _, p := range providers {
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 4, p, 60*time.Second) {
				return
			}
			w := initWorld(t)
			ctx := eptest.Ctx(t, 30*time.Second)
			if err := interBattery(ctx, w.Comm()); err != nil {
				t.Fatalf("rank %d: %v", w.Comm().Rank(), err)
			}
		})
	}
	t.Run("endpoints", func(t *testing.T) {
		if launch(t, 2, "native", 60*time.Second) {
			return
		}
		w := initWorld(t)
		ctx := eptest.Ctx(t, 30*time.Second)
		eps, err := w.Comm().CreateEndpoints(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		runHandles(t, ctx, eps, func(ctx context.Context, e *endpoint.Comm) error {
			defer e.Free()
			return interBattery(ctx, e)
		})
	})
}

// TestIntercommHandles runs the battery on four handles of one process.
func TestIntercommHandles(t *testing.T) {
	ctx, eps := singletonHandles(t, 4)
	runHandles(t, ctx, eps, func(ctx context.Context, e *endpoint.Comm) error {
		defer e.Free()
		return interBattery(ctx, e)
	})
}

// ExampleComm_IntercommCreate joins the even and the odd ranks of four
// handles into an intercommunicator, sends across it by remote rank, and
// merges the two groups back into one communicator, the odd ranks first.
func ExampleComm_IntercommCreate() {
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
			s, err := interExample(ctx, ep)
			if err != nil {
				s = err.Error()
			}
			out[i] = s
		}()
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// rank 0: even rank 0, got "from odd rank 0", merged rank 2
	// rank 1: odd rank 0, got "from even rank 0", merged rank 0
	// rank 2: even rank 1, got "from odd rank 1", merged rank 3
	// rank 3: odd rank 1, got "from even rank 1", merged rank 1
}

// interExample is one handle's part of ExampleComm_IntercommCreate.
func interExample(ctx context.Context, ep *endpoint.Comm) (string, error) {
	color := ep.Rank() % 2
	local, err := ep.Split(ctx, color, ep.Rank())
	if err != nil {
		return "", err
	}
	defer local.Free()
	// The leaders are rank 0 of each group: ep's ranks 0 and 1.
	ic, err := local.IntercommCreate(ctx, 0, ep, 1-color, 0)
	if err != nil {
		return "", err
	}
	defer ic.Free()
	name := [2]string{"even", "odd"}
	msg := make([]byte, 16)
	r, err := ic.Irecv(msg, ic.Rank(), 1) // the remote rank of the same number
	if err != nil {
		return "", err
	}
	if err := ic.Send(ctx, []byte(fmt.Sprintf("from %s rank %d", name[color], ic.Rank())), ic.Rank(), 1); err != nil {
		return "", err
	}
	st, err := r.Wait(ctx)
	if err != nil {
		return "", err
	}
	m, err := ic.Merge(ctx, color == 0) // the odd group low: first
	if err != nil {
		return "", err
	}
	defer m.Free()
	return fmt.Sprintf("rank %d: %s rank %d, got %q, merged rank %d", ep.Rank(), name[color], ic.Rank(), msg[:st.Count], m.Rank()), nil
}
