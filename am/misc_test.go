package am_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-hpc/weft/am"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// TestErrors: bad arguments are errors wrapping ErrInvalid, a message for
// a handler its target has not registered is an error of the target's
// Poll that leaves the next message to handle, and a closed engine
// refuses everything.
func TestErrors(t *testing.T) {
	ctx := eptest.Ctx(t, 30*time.Second)
	if _, err := am.Open(ctx, nil); !errors.Is(err, am.ErrInvalid) {
		t.Errorf("Open(nil): %v", err)
	}
	var nilEngine *am.Engine
	if err := nilEngine.Send(ctx, 0, 1, nil, nil); !errors.Is(err, am.ErrInvalid) {
		t.Errorf("Send on nil: %v", err)
	}
	if err := nilEngine.Close(ctx); err != nil {
		t.Errorf("Close(nil): %v", err)
	}
	eps := handles(t, 2)
	if _, err := am.Open(ctx, eps[0], am.WithInlineLimit(8)); !errors.Is(err, am.ErrInvalid) {
		t.Errorf("inline limit 8: %v", err)
	}
	if _, err := am.Open(ctx, eps[0], nil); !errors.Is(err, am.ErrInvalid) {
		t.Errorf("nil option: %v", err)
	}
	var closed *am.Engine
	onEngines(t, ctx, eps, []am.Option{am.WithInlineLimit(128)}, func(ctx context.Context, e *am.Engine) error {
		var ran atomic.Int32
		e.Register(1, func(ctx context.Context, m *am.Msg) error { ran.Add(1); return nil })
		for _, c := range []struct {
			what string
			err  error
		}{
			{"rank -1", e.Send(ctx, -1, 1, nil, nil)},
			{"rank 2", e.Send(ctx, 2, 1, nil, nil)},
			{"id -1", e.Send(ctx, 0, -1, nil, nil)},
			{"id past MaxHandler", e.Send(ctx, 0, am.MaxHandler+1, nil, nil)},
			{"header over the inline limit", e.Send(ctx, 0, 1, make([]byte, 128-15), nil)},
			{"register id -1", e.Register(-1, nil)},
			{"register past MaxHandler", e.Register(am.MaxHandler+1, nil)},
		} {
			if !errors.Is(c.err, am.ErrInvalid) {
				return errors.New(c.what + ": " + errString(c.err))
			}
		}
		if _, err := e.Call(ctx, 5, 1, nil, nil, nil); !errors.Is(err, am.ErrInvalid) {
			return errors.New("call rank 5: " + errString(err))
		}
		// Rank 0 sends rank 1 a message for handler 9, which it lacks,
		// then one for handler 1.
		if e.Rank() == 0 {
			if err := e.Send(ctx, 1, 9, nil, nil); err != nil {
				return err
			}
			if err := e.Send(ctx, 1, 1, []byte("h"), make([]byte, 500)); err != nil {
				return err
			}
		} else {
			var err error
			for err == nil {
				_, err = e.Poll(ctx)
			}
			if !errors.Is(err, am.ErrInvalid) || !strings.Contains(err.Error(), "no such handler") {
				return errors.New("poll of a message for no handler: " + errString(err))
			}
			for ran.Load() == 0 {
				if _, err := e.Poll(ctx); err != nil {
					return err
				}
			}
			closed = e
		}
		return nil
	})
	if err := closed.Send(ctx, 0, 1, nil, nil); !errors.Is(err, am.ErrClosed) {
		t.Errorf("Send on a closed engine: %v", err)
	}
	if _, err := closed.Poll(ctx); !errors.Is(err, am.ErrClosed) {
		t.Errorf("Poll on a closed engine: %v", err)
	}
	if err := closed.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestQuiesceStress: trees of messages whose handlers forward two
// children each to random ranks after random short delays, started by
// every rank, then Quiesce: every leaf must have been handled when
// Quiesce returns, on every rank; 20 times over, on 4 handles.
func TestQuiesceStress(t *testing.T) {
	const depth = 6 // 2^6 leaves per tree
	ctx := eptest.Ctx(t, 60*time.Second)
	var leaves atomic.Int64
	var inQuiesce atomic.Int32
	eps := handles(t, 4)
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	onEngines(t, ctx, eps, nil, func(ctx context.Context, e *am.Engine) error {
		rng := rand.New(rand.NewPCG(uint64(e.Rank()), 7))
		e.Register(1, func(ctx context.Context, m *am.Msg) error {
			d := int(m.Header()[0])
			if d == depth {
				leaves.Add(1)
				return nil
			}
			spin := time.Duration(rng.IntN(30)) * time.Microsecond
			for t0 := time.Now(); time.Since(t0) < spin; {
			}
			for range 2 {
				if err := e.Send(ctx, rng.IntN(e.Size()), 1, []byte{byte(d + 1)}, nil); err != nil {
					return err
				}
			}
			return nil
		})
		for r := range rounds {
			if err := e.Send(ctx, rng.IntN(e.Size()), 1, []byte{0}, nil); err != nil {
				return err
			}
			inQuiesce.Add(1)
			if err := e.Quiesce(ctx); err != nil {
				return err
			}
			// Every rank has left the same Quiesce: all trees are done.
			if got, want := leaves.Load(), int64((r+1)*e.Size()<<depth); got != want {
				return fmt.Errorf("after Quiesce: %d leaves, want %d", got, want)
			}
			if err := e.Quiesce(ctx); err != nil { // nobody counts leaves of round r+1 early
				return err
			}
		}
		return nil
	})
}

// TestServe: a rank whose main goroutine does no engine call at all (it
// sleeps) answers calls through a Serve goroutine; 2 processes, world
// communicator (which any goroutine may use).
func TestServe(t *testing.T) {
	if launchtest.RunOn(t, 2, "native", 60*time.Second) {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 50*time.Second)
	e, err := am.Open(ctx, w.Comm())
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	e.Register(1, func(ctx context.Context, m *am.Msg) error {
		return m.Reply(append([]byte("served "), m.Header()...))
	})
	e.Register(2, func(ctx context.Context, m *am.Msg) error { stop.Store(true); return nil })
	if e.Rank() == 0 {
		for i := range 200 {
			r, err := e.Call(ctx, 1, 1, []byte{byte(i)}, nil, nil)
			if err != nil || string(r) != "served "+string([]byte{byte(i)}) {
				t.Fatalf("call %d: %q, %v", i, r, err)
			}
		}
		if err := e.Send(ctx, 1, 2, nil, nil); err != nil {
			t.Fatal(err)
		}
	} else {
		sctx, cancel := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- e.Serve(sctx) }()
		for !stop.Load() {
			time.Sleep(time.Millisecond)
		}
		cancel()
		if err := <-served; err != nil {
			t.Fatalf("Serve: %v", err)
		}
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPeerExit: a call to a rank whose process exits mid-call, and a
// Quiesce that waits for a rank whose process has exited, return
// ErrPeerGone within seconds, not at their context's deadline.
// Unsupervised ranks (launchtest.RunMayDie).
func TestPeerExit(t *testing.T) {
	testenv.Short(t, "a process leaving mid-call")
	for _, quiesce := range []bool{false, true} {
		t.Run(fmt.Sprintf("quiesce=%v", quiesce), func(t *testing.T) {
			if !launchtest.IsWorker() {
				launchtest.RunMayDie(t, 2, "shm", 60*time.Second, []int{1}, endpoint.EnvNodeTransport+"=native")
				return
			}
			w := eptest.InitWorld(t)
			ctx := eptest.Ctx(t, 50*time.Second)
			e, err := am.Open(ctx, w.Comm())
			if err != nil {
				t.Fatal(err)
			}
			e.Register(1, func(ctx context.Context, m *am.Msg) error {
				os.Exit(0) // mid-call
				return nil
			})
			if e.Rank() == 1 {
				if quiesce {
					os.Exit(0) // never joins
				}
				for {
					if _, err := e.Poll(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			start := time.Now()
			if quiesce {
				err = e.Quiesce(ctx)
			} else {
				_, err = e.Call(ctx, 1, 1, nil, nil, nil)
			}
			took := time.Since(start)
			t.Logf("with rank 1 gone: %v after %v", err, took)
			if !errors.Is(err, am.ErrPeerGone) || took > 10*time.Second {
				t.Fatalf("with rank 1 gone: %v after %v, want ErrPeerGone at once", err, took)
			}
		})
	}
}
