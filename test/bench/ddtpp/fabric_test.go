package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/test/bench/internal/ddtcases"
)

// TestTypedLayoutsFabric sends every DDTBench layout at sizes s and m (s
// only for the forced paths; -short: s under the cost model on shm only; l goes through the same
// code with more blocks, and the ddtpp benchmark checks its bytes) as
// typed messages between endpoints on libfabric —
// typed→contiguous, contiguous→typed and typed→typed — and checks every
// byte against ddt's own Pack and Unpack: 2 processes × 2 endpoints in a
// ring (one neighbour in the process, one in the other), on shm and
// tcp;ofi_rxm, interpreter and JIT, with the path of large messages left
// to the cost model or forced to zero copy or to the segment pipeline
// (WEFT_TUNE typedpath), so that every layout goes through every regime.
func TestTypedLayoutsFabric(t *testing.T) {
	// Forced zero copy of layouts of 4-byte blocks costs one RMA read per
	// block: those runs take the small size only.
	runs := []struct{ name, prov, jit, path, sizes string }{
		{"shm/jit-off/auto", "shm", "off", "auto", "s,m"},
		{"shm/jit-on/zerocopy", "shm", "on", "zerocopy", "s"},
		{"tcp/jit-on/pipeline", "tcp;ofi_rxm", "on", "pipeline", "s"},
	}
	if testing.Short() {
		runs = runs[:1]
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			if !launchtest.IsWorker() {
				sizes := r.sizes
				if testing.Short() {
					sizes = "s"
				}
				launchtest.Run(t, 2, r.prov, 150*time.Second, "WEFT_NODE_TRANSPORT=fabric",
					"WEFT_JIT="+r.jit, "WEFT_TUNE=typedpath="+r.path, "DDTPP_TEST_SIZES="+sizes)
				return
			}
			sizes := strings.Split(os.Getenv("DDTPP_TEST_SIZES"), ",")
			ctx, cancel := context.WithTimeout(context.Background(), 140*time.Second)
			defer cancel()
			w, err := endpoint.Init(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			eps, err := w.Comm().CreateEndpoints(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			var cases []*ddtcases.Case
			for _, c := range ddtcases.All() {
				for _, s := range sizes {
					if c.Size == s {
						cases = append(cases, c)
					}
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, len(eps))
			for i, c := range eps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Free()
					errs[i] = layoutRing(ctx, c, cases)
					if errs[i] != nil {
						cancel()
					}
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("handle %d: %v", i, err)
				}
			}
		})
	}
}

// layoutRing passes every case around the ring of handles three ways;
// even handles send first, odd ones receive first.
func layoutRing(ctx context.Context, c *endpoint.Comm, cases []*ddtcases.Case) error {
	me, n := c.Rank(), c.Size()
	to, from := (me+1)%n, (me+n-1)%n
	for k, cs := range cases {
		for phase := 0; phase < 2; phase++ {
			var err error
			if me%2 == phase {
				err = layoutSend(ctx, c, cs, to, byte(k))
			} else {
				err = layoutRecv(ctx, c, cs, from, byte(k))
			}
			if err != nil {
				return fmt.Errorf("%v: %w", cs, err)
			}
		}
	}
	return nil
}

// reference returns the case's typed buffer filled from seed and its
// packed stream (ddt Pack).
func reference(cs *ddtcases.Case, seed byte) (typed, packed []byte, err error) {
	typed = make([]byte, cs.Typed)
	ddtcases.Fill(typed, seed)
	packed = make([]byte, cs.Bytes)
	if _, err := cs.Type.Pack(packed, typed, cs.Count); err != nil {
		return nil, nil, err
	}
	return typed, packed, nil
}

func layoutSend(ctx context.Context, c *endpoint.Comm, cs *ddtcases.Case, to int, seed byte) error {
	typed, packed, err := reference(cs, seed)
	if err != nil {
		return err
	}
	if err := c.SendTyped(ctx, typed, cs.Count, cs.Type, to, 1); err != nil {
		return fmt.Errorf("typed→contiguous send: %w", err)
	}
	if err := c.SendTyped(ctx, packed, len(packed), ddt.Byte, to, 2); err != nil {
		return fmt.Errorf("contiguous→typed send: %w", err)
	}
	if err := c.SendTyped(ctx, typed, cs.Count, cs.Type, to, 3); err != nil {
		return fmt.Errorf("typed→typed send: %w", err)
	}
	return nil
}

func layoutRecv(ctx context.Context, c *endpoint.Comm, cs *ddtcases.Case, from int, seed byte) error {
	_, packed, err := reference(cs, seed)
	if err != nil {
		return err
	}
	got := make([]byte, len(packed))
	if st, err := c.RecvTyped(ctx, got, len(got), ddt.Byte, from, 1); err != nil || st.Count != len(packed) {
		return fmt.Errorf("typed→contiguous: %+v %v", st, err)
	}
	if i := firstDiff(got, packed); i >= 0 {
		return fmt.Errorf("typed→contiguous: packed byte %d of %d differs", i, len(packed))
	}
	// The typed receives land in a buffer filled from another seed: the
	// bytes outside the layout must stay as they were.
	want := make([]byte, cs.Typed)
	ddtcases.Fill(want, seed+101)
	if _, err := cs.Type.Unpack(want, packed, cs.Count); err != nil {
		return err
	}
	for _, tag := range []int{2, 3} {
		dst := make([]byte, cs.Typed)
		ddtcases.Fill(dst, seed+101)
		if st, err := c.RecvTyped(ctx, dst, cs.Count, cs.Type, from, tag); err != nil || st.Count != len(packed) {
			return fmt.Errorf("tag %d into the layout: %+v %v", tag, st, err)
		}
		if i := firstDiff(dst, want); i >= 0 {
			return fmt.Errorf("tag %d into the layout: typed byte %d of %d differs", tag, i, len(want))
		}
	}
	return nil
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return len(a)
}
