package fabric

import (
	"testing"
	"time"
)

// countYields replaces the yield with a counter for the test's duration.
func countYields(t *testing.T) *int {
	t.Helper()
	n := 0
	old := yieldHook
	yieldHook = func() { n++ }
	t.Cleanup(func() { yieldHook = old })
	return &n
}

func TestPollYieldTick(t *testing.T) {
	n := countYields(t)
	old := SetPollYield(time.Nanosecond)
	t.Cleanup(func() { SetPollYield(old) })

	var y pollYield
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

	SetPollYield(time.Hour) // the interval has not passed since the last yield
	for range 4 * pollCheckEvery {
		y.tick()
	}
	if *n != 1 {
		t.Fatalf("interval not passed: %d yields, want 1", *n)
	}

	if prev := SetPollYield(0); prev != time.Hour {
		t.Fatalf("SetPollYield returned %v, want 1h", prev)
	}
	y.last.Store(0)
	for range 4 * pollCheckEvery {
		y.tick()
	}
	if *n != 1 {
		t.Fatalf("yield off: %d yields, want 1", *n)
	}
	if SetPollYield(-time.Second); pollYieldNanos.Load() != 0 {
		t.Fatalf("negative interval stored as %d", pollYieldNanos.Load())
	}
}

// TestPollingYields drives the real polling entry points on an empty shm CQ
// and checks that each of them goes through the yield when it calls C
// through cgo, and never when it takes the fast path (the runtime preempts
// a goroutine in a fast call by itself).
func TestPollingYields(t *testing.T) {
	t.Run("cgo", func(t *testing.T) { testPollingYields(t, FastCallOff, 1) })
	if fastSupported() {
		t.Run("fast", func(t *testing.T) { testPollingYields(t, FastCallAuto, 0) })
	}
}

func testPollingYields(t *testing.T, mode FastCall, want int) {
	withFastCall(t, mode)
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg})
	n := countYields(t)
	old := SetPollYield(time.Nanosecond)
	t.Cleanup(func() { SetPollYield(old) })

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
