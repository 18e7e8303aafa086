package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// TestSingleton runs hello in-process as a job of one rank (no launcher):
// the ring is a send to itself over the selected provider.
func TestSingleton(t *testing.T) {
	launchtest.AsSingleton(t)
	t.Setenv("WEFT_PROVIDER", "shm")
	if err := run(); err != nil {
		t.Fatal(err)
	}
}

// fakeCQ hands out queued completions, one batch per Read, and counts the
// reads; Read never waits, like fabric's.
type fakeCQ struct {
	batches [][]fabric.Completion
	reads   int
}

func (f *fakeCQ) Read(out []fabric.Completion) (int, error) {
	f.reads++
	if len(f.batches) == 0 {
		return 0, nil
	}
	n := copy(out, f.batches[0])
	f.batches = f.batches[1:]
	return n, nil
}

// TestRetrySendProgressesWithoutWaiting checks the refused-send path: each
// ErrAgain is followed by exactly one non-blocking CQ read (which drives the
// provider's progress) and then another try, with no wait for a completion
// that a refused send never produces; completions read meanwhile are kept.
func TestRetrySendProgressesWithoutWaiting(t *testing.T) {
	cq := &fakeCQ{batches: [][]fabric.Completion{{{Context: ctxRecv}}}}
	var got struct{ recv, send bool }
	tries := 0
	err := retrySend(context.Background(), cq, &got, func() error {
		tries++
		if tries <= 3 {
			return fmt.Errorf("post: %w", fabric.ErrAgain)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tries != 4 || cq.reads != 3 {
		t.Fatalf("tries=%d reads=%d, want 4 tries and 3 CQ reads", tries, cq.reads)
	}
	if !got.recv || got.send {
		t.Fatalf("got=%+v, want the receive completion read during the retries recorded", got)
	}
}

// TestRetrySendStops checks that retrySend returns a provider error other
// than ErrAgain at once and gives up on a refused send when ctx ends.
func TestRetrySendStops(t *testing.T) {
	var got struct{ recv, send bool }
	boom := errors.New("boom")
	cq := &fakeCQ{}
	if err := retrySend(context.Background(), cq, &got, func() error { return boom }); !errors.Is(err, boom) || cq.reads != 0 {
		t.Fatalf("err=%v reads=%d, want boom and no CQ read", err, cq.reads)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := retrySend(ctx, cq, &got, func() error { return fabric.ErrAgain })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err=%v, want context.Canceled", err)
	}
}
