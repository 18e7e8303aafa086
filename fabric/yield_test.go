package fabric

import (
	"testing"
	"time"
)

// withYieldHook makes the poll yield of the domain's CQs call f instead of
// runtime.Gosched.
func withYieldHook(f func()) DomainOption {
	return func(c *domainConfig) { c.yieldHook = f }
}

func TestPollYieldTick(t *testing.T) {
	t.Parallel()
	n := new(int)
	y := pollYield{every: int64(time.Nanosecond), hook: func() { *n++ }}
	for range pollCheckEvery - 1 {
		y.tick()
	}
	if *n != 0 {
		t.Fatalf("yielded %d times before the %dth call", *n, pollCheckEvery)
	}
	y.tick()
	if *n != 1 {
		t.Fatalf("interval passed: %d yields after %d calls, want 1", *n, pollCheckEvery)
	}

	y.every = int64(time.Hour) // the interval has not passed since the last yield
	for range 4 * pollCheckEvery {
		y.tick()
	}
	if *n != 1 {
		t.Fatalf("interval not passed: %d yields, want 1", *n)
	}

	y.every = 0
	y.last.Store(0)
	for range 4 * pollCheckEvery {
		y.tick()
	}
	if *n != 1 {
		t.Fatalf("yield off: %d yields, want 1", *n)
	}
}

// TestPollingYields drives the real polling entry points on an empty shm CQ
// and checks that each of them goes through the yield when it calls C
// through cgo, and never when it takes the fast path (the runtime preempts
// a goroutine in a fast call by itself).
func TestPollingYields(t *testing.T) {
	t.Parallel()
	t.Run("cgo", func(t *testing.T) { testPollingYields(t, FastCallOff, 1) })
	if fastSupported() {
		t.Run("fast", func(t *testing.T) { testPollingYields(t, FastCallAuto, 0) })
	}
}

func testPollingYields(t *testing.T, mode FastCall, want int) {
	n := new(int)
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, WithFastCall(mode),
		WithPollYield(time.Nanosecond), withYieldHook(func() { *n++ }))

	var comps [4]Completion
	var word uint64
	sink, err := NewSignalSink(make([]byte, 64), 1)
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		poll func() error
	}{
		{"Read", func() error { _, err := p.a.cq.Read(comps[:]); return err }},
		{"ReadSpin", func() error { _, err := p.a.cq.ReadSpin(comps[:], 2); return err }},
		{"WaitWord", func() error { _, _, err := p.a.cq.WaitWord(&word, 1, comps[:], 2); return err }},
		{"PostAndRead", func() error { _, _, err := p.a.ep.PostAndRead(nil, p.a.cq, comps[:], 2); return err }},
		{"ReadSignals", func() error { _, err := p.a.cq.ReadSignals(sink, comps[:], 2); return err }},
		{"WaitWordSignals", func() error { _, _, err := p.a.cq.WaitWordSignals(sink, &word, 1, comps[:], 2); return err }},
	}
	for _, c := range calls {
		before, fast := *n, fastUsed(p.a.cq.fast)
		for range pollCheckEvery {
			if err := c.poll(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if *n != before+want {
			t.Errorf("%s: %d yields in %d polls, want %d", c.name, *n-before, pollCheckEvery, want)
		}
		if got := fastUsed(p.a.cq.fast) - fast; (got == pollCheckEvery) != (mode != FastCallOff) {
			t.Errorf("%s: %d of %d polls took the fast path (mode %v)", c.name, got, pollCheckEvery, mode)
		}
	}
}
