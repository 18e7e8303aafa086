package progress

import (
	"sync"
	"testing"
)

func TestGuardExcludes(t *testing.T) {
	var g Guard
	g.Enter()
	if g.TryForeign() {
		t.Fatal("foreign poll claimed an object its owner is inside")
	}
	g.Exit()
	if !g.TryForeign() {
		t.Fatal("foreign poll could not claim an idle object")
	}
	if g.TryForeign() {
		t.Fatal("two foreign polls at once")
	}
	g.EndForeign()
	if g.Busy() {
		t.Fatal("busy after everyone left")
	}
}

// TestGuardRace runs owners and foreign pollers on one unsynchronised
// counter; under -race any overlap is reported, and the count must add up.
func TestGuardRace(t *testing.T) {
	var g Guard
	counter := 0
	var wg sync.WaitGroup
	const n = 2000
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			g.Enter()
			counter++
			g.Exit()
		}
	}()
	polled := 0
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			if g.TryForeign() {
				counter++
				polled++
				g.EndForeign()
			}
		}
	}()
	wg.Wait()
	if counter != n+polled {
		t.Fatalf("counter %d, want %d", counter, n+polled)
	}
}

func TestRegistry(t *testing.T) {
	before := Registered()
	calls := 0
	s := Register(func() { calls++ })
	if Registered() != before+1 {
		t.Fatalf("%d registered, want %d", Registered(), before+1)
	}
	PollAll()
	Unregister(s)
	Unregister(s)
	Unregister(nil)
	PollAll()
	if calls != 1 || Registered() != before {
		t.Fatalf("%d calls, %d registered", calls, Registered())
	}
}
