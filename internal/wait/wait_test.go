package wait

import (
	"testing"
	"time"
)

// fake is a Sys whose clock moves only when the test (or a nap or yield)
// says so, and which records what the waiter did.
type fake struct {
	now                  time.Duration
	gosched, osyield     int
	naps                 []time.Duration
	yieldCost, goschCost time.Duration
}

func (f *fake) sys() *Sys {
	return &Sys{
		Now:     func() time.Duration { return f.now },
		Gosched: func() { f.gosched++; f.now += f.goschCost },
		OSYield: func() { f.osyield++; f.now += f.yieldCost },
		Nap:     func(d time.Duration) { f.naps = append(f.naps, d); f.now += d },
	}
}

var timed = Policy{Name: "t", SpinPolls: -1, SpinFor: 50 * time.Microsecond, YieldFor: time.Millisecond,
	NapMax: 200 * time.Microsecond, OSYieldEvery: 2, Contended: 20 * time.Microsecond}

func TestWaiterPhases(t *testing.T) {
	f := &fake{}
	w := Waiter{P: &timed, Sys: f.sys()}
	// Spin: no yields however many polls, while the clock stands still.
	for i := 0; i < 1000; i++ {
		w.Pause()
	}
	if w.Phase() != Spin || f.gosched+f.osyield != 0 {
		t.Fatalf("after 1000 polls at t=0: phase %d, %d yields", w.Phase(), f.gosched+f.osyield)
	}
	// Past SpinFor: yield phase, alternating goroutine and process yields.
	f.now = 60 * time.Microsecond
	for i := 0; i < 16 && w.Phase() == Spin; i++ {
		w.Pause()
	}
	if w.Phase() != Yield {
		t.Fatalf("phase %d past the spin budget, want Yield", w.Phase())
	}
	for i := 0; i < 10; i++ {
		if !w.Pause() {
			t.Fatal("Pause in the yield phase did not ask for the slow checks")
		}
	}
	if f.gosched != 5 || f.osyield != 5 {
		t.Fatalf("yield phase: %d Gosched, %d sched_yield; want 5 and 5", f.gosched, f.osyield)
	}
	// Past SpinFor+YieldFor: naps doubling from FirstNap up to NapMax.
	f.now = 2 * time.Millisecond
	w.Pause()
	if w.Phase() != Nap {
		t.Fatalf("phase %d past the yield budget, want Nap", w.Phase())
	}
	for i := 0; i < 6; i++ {
		w.Pause()
	}
	want := []time.Duration{10, 20, 40, 80, 160, 200}
	for i, d := range want {
		if f.naps[i] != d*time.Microsecond {
			t.Fatalf("naps %v, want %v µs", f.naps, want)
		}
	}
}

func TestWaiterContended(t *testing.T) {
	f := &fake{goschCost: 30 * time.Microsecond, yieldCost: 30 * time.Microsecond}
	w := Waiter{P: &timed, Sys: f.sys()}
	w.Pause() // the wait starts at t=0
	f.now = 60 * time.Microsecond
	for i := 0; i < 16 && w.Phase() == Spin; i++ {
		w.Pause()
	}
	w.Pause() // one yield that took 30 µs: the core is contended
	if w.Phase() != Nap {
		t.Fatalf("phase %d after a slow yield, want Nap", w.Phase())
	}
	// Within the yield budget a nap is followed by one yield; a fast one
	// brings the waiter back to yielding.
	f.yieldCost = 0
	w.Pause()
	if w.Phase() != Yield || len(f.naps) != 1 {
		t.Fatalf("phase %d, %d naps after a fast yield, want Yield after 1", w.Phase(), len(f.naps))
	}
}

func TestWaiterSpinPolls(t *testing.T) {
	f := &fake{}
	p := timed
	p.SpinPolls = 100
	w := Waiter{P: &p, Sys: f.sys()}
	for i := 0; i < 95; i++ {
		w.Pause()
	}
	if !w.Spinning() {
		t.Fatal("left the spin phase before SpinPolls polls")
	}
	for i := 0; i < 32; i++ { // the phase is looked at every 16 polls
		w.Pause()
	}
	if w.Spinning() {
		t.Fatal("still spinning after SpinPolls polls")
	}
}

func TestWaiterGoschedWhileSpinning(t *testing.T) {
	f := &fake{}
	p := timed
	p.SpinPolls, p.GoschedEvery = 1e9, 500*time.Microsecond
	w := Waiter{P: &p, Sys: f.sys()}
	for i := 0; i < 64; i++ {
		f.now += 100 * time.Microsecond / 16
		w.Pause()
	}
	if f.gosched != 0 {
		t.Fatalf("%d Gosched within 400 µs of spinning", f.gosched)
	}
	for i := 0; i < 64; i++ {
		f.now += 100 * time.Microsecond / 16
		w.Pause()
	}
	if f.gosched != 1 {
		t.Fatalf("%d Gosched after 800 µs of spinning, want 1", f.gosched)
	}
}

// TestSolo: a yield to processes on every poll, to goroutines every
// SoloGosched-th.
func TestSolo(t *testing.T) {
	f := &fake{}
	s := f.sys()
	for spins := 1; spins <= 2*SoloGosched; spins++ {
		Solo(s, spins)
	}
	if f.gosched != 2 || f.osyield != 2*SoloGosched-2 {
		t.Fatalf("%d Gosched, %d sched_yield over %d polls; want 2 and %d", f.gosched, f.osyield, 2*SoloGosched, 2*SoloGosched-2)
	}
}

func TestIdleCounting(t *testing.T) {
	f := &fake{}
	p := Policy{SpinPolls: 256, YieldEvery: 16, OSYieldEvery: 4}
	s := f.sys()
	for spins := 16; spins < 256; spins += 16 {
		if p.Idle(s, spins) || p.Spun(spins) {
			t.Fatalf("yielded or past the budget at poll %d of a 256-poll spin", spins)
		}
	}
	for spins := 256; spins < 256+16*8; spins += 16 {
		if !p.Idle(s, spins) {
			t.Fatalf("no yield at poll %d", spins)
		}
	}
	if f.osyield != 2 || f.gosched != 6 {
		t.Fatalf("%d sched_yield, %d Gosched over 8 yields; want 2 and 6", f.osyield, f.gosched)
	}
	p.OSYieldEvery = 0
	f.osyield = 0
	for spins := 256; spins < 1024; spins += 16 {
		p.Idle(s, spins)
	}
	if f.osyield != 0 {
		t.Fatal("sched_yield with OSYieldEvery 0")
	}
	// YieldPolls: past the spin budget from 256, yielding from 2048.
	p = Policy{SpinPolls: 256, YieldPolls: 2048, YieldEvery: 16, OSYieldEvery: 4}
	f.osyield, f.gosched = 0, 0
	for spins := 256; spins < 2048; spins += 16 {
		if !p.Spun(spins) {
			t.Fatalf("not past the spin budget at poll %d", spins)
		}
		if p.Idle(s, spins) {
			t.Fatalf("yielded at poll %d, before YieldPolls", spins)
		}
	}
	for spins := 2048; spins < 2048+16*8; spins += 16 {
		if !p.Idle(s, spins) {
			t.Fatalf("no yield at poll %d", spins)
		}
	}
	if f.osyield != 2 || f.gosched != 6 {
		t.Fatalf("%d sched_yield, %d Gosched over 8 yields from YieldPolls; want 2 and 6", f.osyield, f.gosched)
	}
}

func TestNodeCPUs(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		getenv     func(string) string
		mine, want int
	}{
		{env(), 4, 4},
		{env("WEFT_NODE_CPUS", "8"), 1, 8}, // a rank bound to 1 of 8
		{env("WEFT_NODE_CPUS", "8", "SLURM_CPUS_ON_NODE", "4"), 1, 8}, // fabrun's word first
		{env("SLURM_CPUS_ON_NODE", "4"), 1, 4},
		{env("WEFT_NODE_CPUS", "2"), 4, 4}, // never fewer than this process's
		{env("WEFT_NODE_CPUS", "x", "SLURM_CPUS_ON_NODE", "-3"), 2, 2},
	} {
		if got := nodeCPUsFrom(c.getenv, c.mine); got != c.want {
			t.Errorf("nodeCPUsFrom(mine %d) = %d, want %d", c.mine, got, c.want)
		}
	}
	if n := NodeCPUs(); n < 1 || Crowded(n) || !Crowded(n+1) {
		t.Errorf("NodeCPUs %d, Crowded(%d) %v, Crowded(%d) %v", n, n, Crowded(n), n+1, Crowded(n+1))
	}
}
