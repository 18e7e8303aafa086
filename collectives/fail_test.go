package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// each runs body on every handle of eps with its own collectives handle,
// with no cancellation between them (unlike onHandles), and returns every
// handle's error and how long each body took.
func each(t *testing.T, ctx context.Context, eps []*endpoint.Comm, opts []C.Option, body func(ctx context.Context, c *C.Coll) error) ([]error, []time.Duration) {
	t.Helper()
	errs := make([]error, len(eps))
	took := make([]time.Duration, len(eps))
	var wg sync.WaitGroup
	for i, e := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := C.New(ctx, e, opts...)
			if err != nil {
				errs[i] = fmt.Errorf("New: %w", err)
				return
			}
			start := time.Now()
			errs[i] = body(ctx, c)
			took[i] = time.Since(start)
			c.Free()
		}()
	}
	wg.Wait()
	return errs, took
}

// quick is how soon a rank must see another's failure: far below the
// tests' context deadlines, which a hang would reach.
const quick = 5 * time.Second

// TestCanceledContext: ranks waiting in a collective for a rank that never
// joins return once their context is cancelled, with an error wrapping
// context.Canceled; the handle is unusable afterwards; a context ended
// before the call ends it at once. The absent rank's Free reports the
// abort notices the others left it.
func TestCanceledContext(t *testing.T) {
	eps := handles(t, 4)
	ctx := eptest.Ctx(t, 60*time.Second)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var absentFree error
	errs, took := each(t, ctx, eps, nil, func(_ context.Context, c *C.Coll) error {
		if c.Rank() == 0 {
			time.Sleep(100 * time.Millisecond)
			cancel()
			time.Sleep(200 * time.Millisecond) // the others' notices arrive
			absentFree = c.Free()
			return nil
		}
		x := make([]float64, 3)
		err := C.Allreduce(cctx, c, nil, x, C.Sum[float64]())
		if err == nil {
			return errors.New("Allreduce without rank 0 succeeded")
		}
		if !errors.Is(err, context.Canceled) {
			return fmt.Errorf("want context.Canceled: %w", err)
		}
		if err := C.Barrier(ctx, c); !errors.Is(err, C.ErrClosed) {
			return fmt.Errorf("Barrier after a failed call: %v, want ErrClosed", err)
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("handle %d: %v", i, err)
		}
		if took[i] > quick {
			t.Errorf("handle %d took %v", i, took[i])
		}
	}
	if !errors.Is(absentFree, C.ErrInvalid) || !strings.Contains(absentFree.Error(), "matched no collective") {
		t.Errorf("Free of the absent rank: %v, want the others' messages reported", absentFree)
	}

	done, stop := context.WithCancel(ctx)
	stop()
	errs, _ = each(t, ctx, handles(t, 1), nil, func(_ context.Context, c *C.Coll) error {
		if err := C.Barrier(done, c); !errors.Is(err, context.Canceled) {
			return fmt.Errorf("Barrier with an ended context: %v", err)
		}
		return nil
	})
	if errs[0] != nil {
		t.Error(errs[0])
	}
}

// mismatch runs body on 4 handles, expects every rank to fail quickly
// (within quick, under a 60 s context) and at least one with ErrInvalid.
func mismatch(t *testing.T, opts []C.Option, body func(ctx context.Context, c *C.Coll) error) []error {
	t.Helper()
	errs, took := each(t, eptest.Ctx(t, 60*time.Second), handles(t, 4), opts, body)
	invalid := false
	for i, err := range errs {
		switch {
		case err == nil:
			t.Errorf("handle %d: no error", i)
		case errors.Is(err, context.DeadlineExceeded):
			t.Errorf("handle %d hung: %v", i, err)
		default:
			t.Logf("handle %d: %v", i, err)
		}
		invalid = invalid || errors.Is(err, C.ErrInvalid)
		if took[i] > quick {
			t.Errorf("handle %d took %v", i, took[i])
		}
	}
	if !invalid {
		t.Error("no rank reported ErrInvalid")
	}
	return errs
}

// TestCountMismatch: one rank's Allreduce has another count than the
// others': every rank returns an error.
func TestCountMismatch(t *testing.T) {
	mismatch(t, nil, func(ctx context.Context, c *C.Coll) error {
		n := 6
		if c.Rank() == 2 {
			n = 5
		}
		return C.Allreduce(ctx, c, make([]int32, n), make([]int32, n), C.Sum[int32]())
	})
	// A larger message, past the eager limit, to a root expecting fewer
	// bytes: the root fails (the senders' sends complete), and the next
	// collective fails everywhere.
	mismatch(t, nil, func(ctx context.Context, c *C.Coll) error {
		var err error
		if c.Rank() == 0 {
			err = C.Gatherv(ctx, c, make([]byte, 10), make([]byte, 40), []int{10, 10, 10, 10}, []int{0, 10, 20, 30}, 0)
			if !errors.Is(err, C.ErrTruncated) {
				return fmt.Errorf("root: %v, want ErrTruncated", err)
			}
		} else {
			err = C.Gatherv(ctx, c, make([]byte, 10+100000*c.Rank()), nil, nil, nil, 0)
		}
		if err != nil {
			return err
		}
		return C.Barrier(ctx, c)
	})
}

// TestKindMismatch: ranks calling different collectives fail.
func TestKindMismatch(t *testing.T) {
	mismatch(t, nil, func(ctx context.Context, c *C.Coll) error {
		x := make([]float64, 4)
		var err error
		if c.Rank() == 0 {
			err = C.Bcast(ctx, c, x, 0) // its sends complete: it sees the mismatch next
		} else {
			err = C.Allreduce(ctx, c, nil, x, C.Sum[float64]())
		}
		if err != nil {
			return err
		}
		return C.Barrier(ctx, c)
	})
}

// TestAlgorithmMismatch: an Alltoall that some ranks run by Bruck's
// algorithm and others by the linear exchange (ranks set differently)
// fails on every rank instead of pairing unlike messages — on 3 ranks,
// where each of Bruck's messages carries one block, the sizes agree and
// only the call's signature tells them apart. The linear and pairwise
// exchanges mixed complete (TestAlltoallCrowded).
func TestAlgorithmMismatch(t *testing.T) {
	errs, took := each(t, eptest.Ctx(t, 60*time.Second), handles(t, 3), []C.Option{C.WithHierarchy(C.HierOff)},
		func(ctx context.Context, c *C.Coll) error {
			alg := C.Linear
			if c.Rank() == 1 {
				alg = C.Bruck
			}
			if err := c.SetAlgorithm(C.CollAlltoall, alg); err != nil {
				return err
			}
			send := make([]int32, 3*2)
			for i := range send {
				send[i] = int32(10*c.Rank() + i)
			}
			if err := C.Alltoall(ctx, c, send, make([]int32, 3*2)); err != nil {
				return err
			}
			return C.Barrier(ctx, c)
		})
	for i, err := range errs {
		if !errors.Is(err, C.ErrInvalid) || took[i] > quick {
			t.Errorf("handle %d: %v after %v, want ErrInvalid at once", i, err, took[i])
		}
	}
}

// TestBadArgumentElsewhere: one rank's bad argument (detected locally,
// before it sends anything) makes the others' calls fail too.
func TestBadArgumentElsewhere(t *testing.T) {
	errs := mismatch(t, nil, func(ctx context.Context, c *C.Coll) error {
		recv := make([]int32, 4*3)
		if c.Rank() == 1 {
			recv = recv[:5]
		}
		return C.Allgather(ctx, c, make([]int32, 3), recv)
	})
	if !strings.Contains(errs[1].Error(), "len(recv)") {
		t.Errorf("rank 1: %v, want its argument named", errs[1])
	}
}

// TestRootMismatch: with WithChecks, a Gather whose root differs between
// ranks (without the check every rank would wait for ever for the others)
// fails on every rank, and the handle stays usable. Without it, a Bcast
// whose root differs is seen at the latest by the next collective or at
// Free: no rank waits for ever.
func TestRootMismatch(t *testing.T) {
	eps := handles(t, 4)
	ctx := eptest.Ctx(t, 60*time.Second)
	errs, took := each(t, ctx, eps, []C.Option{C.WithChecks(true)}, func(ctx context.Context, c *C.Coll) error {
		root := 0
		if c.Rank() == 3 {
			root = 1
		}
		recv := make([]int32, 4*2)
		err := C.Gather(ctx, c, []int32{1, 2}, recv, root)
		if !errors.Is(err, C.ErrInvalid) {
			return fmt.Errorf("Gather with mismatched roots: %v, want ErrInvalid", err)
		}
		x := []int32{int32(c.Rank())}
		if err := C.Allreduce(ctx, c, nil, x, C.Sum[int32]()); err != nil {
			return fmt.Errorf("Allreduce after the checked mismatch: %w", err)
		}
		if x[0] != 6 {
			return fmt.Errorf("Allreduce after the checked mismatch: %d, want 6", x[0])
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("checked, handle %d: %v", i, err)
		}
		if took[i] > quick {
			t.Errorf("checked, handle %d took %v", i, took[i])
		}
	}

	var mu sync.Mutex
	seen := 0
	errs, took = each(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		root := 1
		if c.Rank() == 0 {
			root = 0
		}
		err := C.Bcast(ctx, c, make([]int64, 3), root)
		if err == nil {
			err = C.Barrier(ctx, c)
		}
		if err == nil {
			err = c.Free()
		}
		if err != nil {
			mu.Lock()
			seen++
			mu.Unlock()
			if !errors.Is(err, C.ErrInvalid) && !errors.Is(err, C.ErrCanceled) {
				return err
			}
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("unchecked, handle %d: %v", i, err)
		}
		if took[i] > quick {
			t.Errorf("unchecked, handle %d took %v", i, took[i])
		}
	}
	if seen == 0 {
		t.Error("unchecked: no rank saw the root mismatch (in Bcast, the next Barrier or Free)")
	}
}

type withPointer struct {
	X int
	P *int
}

// TestLocalErrors: bad arguments give errors wrapping ErrInvalid (or
// ErrClosed), never a panic; each on a fresh one-rank handle.
func TestLocalErrors(t *testing.T) {
	ep := handles(t, 1)[0]
	ctx := eptest.Ctx(t, 30*time.Second)
	i32 := func(n int) []int32 { return make([]int32, n) }
	cases := []struct {
		name string
		call func(c *C.Coll) error
		want error
	}{
		{"zero op", func(c *C.Coll) error { return C.Allreduce(ctx, c, i32(1), i32(1), C.Op[int32]{}) }, C.ErrInvalid},
		{"pointer element", func(c *C.Coll) error { return C.Bcast(ctx, c, []withPointer{{}}, 0) }, C.ErrInvalid},
		{"string element", func(c *C.Coll) error { return C.Allgather(ctx, c, []string{"a"}, []string{""}) }, C.ErrInvalid},
		{"empty element", func(c *C.Coll) error { return C.Bcast(ctx, c, []struct{}{{}}, 0) }, C.ErrInvalid},
		{"root", func(c *C.Coll) error { return C.Bcast(ctx, c, i32(1), 1) }, C.ErrInvalid},
		{"negative root", func(c *C.Coll) error { return C.Reduce(ctx, c, i32(1), i32(1), C.Sum[int32](), -1) }, C.ErrInvalid},
		{"length", func(c *C.Coll) error { return C.Allreduce(ctx, c, i32(2), i32(3), C.Sum[int32]()) }, C.ErrInvalid},
		{"alias", func(c *C.Coll) error { x := i32(4); return C.Allreduce(ctx, c, x[:2], x[1:3], C.Sum[int32]()) }, C.ErrInvalid},
		{"gatherv counts", func(c *C.Coll) error { return C.Gatherv(ctx, c, i32(1), i32(1), []int{1, 1}, []int{0, 0}, 0) }, C.ErrInvalid},
		{"gatherv outside", func(c *C.Coll) error { return C.Gatherv(ctx, c, i32(2), i32(1), []int{2}, []int{0}, 0) }, C.ErrInvalid},
		{"alltoallv negative", func(c *C.Coll) error {
			return C.Alltoallv(ctx, c, i32(1), []int{-1}, []int{0}, i32(1), []int{1}, []int{0})
		}, C.ErrInvalid},
		{"alltoall shape", func(c *C.Coll) error { return C.Alltoall(ctx, c, i32(2), i32(3)) }, C.ErrInvalid},
		{"reduce-scatter length", func(c *C.Coll) error { return C.ReduceScatterBlock(ctx, c, i32(3), i32(2), C.Sum[int32]()) }, C.ErrInvalid},
		{"freed", func(c *C.Coll) error { c.Free(); return C.Barrier(ctx, c) }, C.ErrClosed},
		{"nil handle", func(*C.Coll) error { return C.Barrier(ctx, nil) }, C.ErrInvalid},
		{"algorithm", func(c *C.Coll) error { return c.SetAlgorithm(C.CollBcast, C.Ring) }, C.ErrInvalid},
		{"apply", func(*C.Coll) error { return C.Sum[int32]().Apply(i32(2), i32(3)) }, C.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := C.New(ctx, ep)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Free()
			err = tc.call(c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
	if _, err := C.New(ctx, nil); !errors.Is(err, C.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
	for _, o := range []C.Option{C.WithAlgorithm(C.CollScan, C.Bruck), C.WithThreshold(C.CollBcast, -1), C.WithThreshold(C.CollBarrier, 10), nil} {
		if _, err := C.New(ctx, ep, o); !errors.Is(err, C.ErrInvalid) {
			t.Errorf("New with a bad option: %v", err)
		}
	}
	var nilColl *C.Coll
	if nilColl.Free() != nil || nilColl.Rank() != -1 || nilColl.Size() != 0 {
		t.Error("nil handle methods")
	}
}

// TestIsolation: a user's receive from any rank with any tag, posted on
// the communicator the handle was made over, matches none of the
// collectives' messages.
func TestIsolation(t *testing.T) {
	eps := handles(t, 3)
	runHandles(t, eptest.Ctx(t, 30*time.Second), eps, nil, func(ctx context.Context, c *C.Coll) error {
		user := make([]byte, 64)
		r, err := c.Comm().Irecv(user, endpoint.AnySource, endpoint.AnyTag)
		if err != nil {
			return err
		}
		if err := battery(ctx, c, false); err != nil {
			return err
		}
		if r.Done() {
			_, st, _ := r.Test()
			return fmt.Errorf("the user's receive matched a collective message from rank %d tag %d", st.Source, st.Tag)
		}
		if err := r.Cancel(); err != nil {
			return err
		}
		_, err = r.Wait(ctx)
		if !errors.Is(err, endpoint.ErrCanceled) {
			return fmt.Errorf("cancelled user receive: %v", err)
		}
		return nil
	})
}

// TestChecked: the battery in checked mode (every call agreed on first).
func TestChecked(t *testing.T) {
	runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, 5), []C.Option{C.WithChecks(true)}, func(ctx context.Context, c *C.Coll) error {
		return battery(ctx, c, false)
	})
}

// TestTuneKnobs: WEFT_TUNE's coll* keys and WEFT_COLL_DETERMINISTIC set a
// handle's selection and mode; options win over them.
func TestTuneKnobs(t *testing.T) {
	if launchtest.RunOn(t, 1, "native", 30*time.Second, "WEFT_TUNE=collallreduce=ring,collbcastlarge=1K", C.EnvDeterministic+"=1") {
		return
	}
	w := eptest.InitWorld(t)
	ctx := eptest.Ctx(t, 20*time.Second)
	eps, err := w.Comm().CreateEndpoints(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, e := range eps {
			e.Free()
		}
	}()
	if os.Getenv("WEFT_TUNE") == "" {
		t.Fatal("WEFT_TUNE not passed to the worker")
	}
	runHandles(t, ctx, eps, nil, func(ctx context.Context, c *C.Coll) error {
		if a := c.Algorithm(C.CollAllreduce, 8); a != C.Ring {
			return fmt.Errorf("collallreduce=ring: Allreduce of 8 bytes uses %v", a)
		}
		if a := c.Algorithm(C.CollBcast, 2048); a != C.ScatterAllgather {
			return fmt.Errorf("collbcastlarge=1K: Bcast of 2 KiB uses %v", a)
		}
		if !c.Deterministic() {
			return errors.New("WEFT_COLL_DETERMINISTIC=1 ignored")
		}
		return detBattery(ctx, c, []int{5})
	})
	runHandles(t, ctx, eps, []C.Option{C.WithAlgorithm(C.CollAllreduce, C.Auto), C.WithThreshold(C.CollBcast, 1<<20), C.Deterministic(false)},
		func(ctx context.Context, c *C.Coll) error {
			if a := c.Algorithm(C.CollAllreduce, 8); a != C.RecursiveDoubling {
				return fmt.Errorf("option Auto over collallreduce=ring: %v", a)
			}
			if a := c.Algorithm(C.CollBcast, 2048); a != C.Binomial {
				return fmt.Errorf("option threshold over collbcastlarge: %v", a)
			}
			if c.Deterministic() {
				return errors.New("option Deterministic(false) ignored")
			}
			return C.Barrier(ctx, c)
		})
}
