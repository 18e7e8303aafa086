package choose

import (
	"testing"
	"time"
)

// TestPair: a size class tries way 0 and way 1 warmUp times each (the
// fastest sample of each setting its estimate), then takes the faster,
// trying the other once ProbeInterval and ProbeCalls calls, or
// ProbeMaxCalls calls, have passed;
// a faster sample moves an estimate halfway down, a slower one an eighth
// up; classes are independent; a change of the faster way is seen by a
// try and then followed, but a way only slightly faster does not take
// over.
func TestPair(t *testing.T) {
	var p Pair
	const mib = 1 << 20
	now := time.Unix(1000, 0)
	tick := func() time.Time { now = now.Add(time.Millisecond); return now }
	if way, known := p.Faster(mib); way != 0 || known {
		t.Fatalf("Faster before any sample = %d, %v", way, known)
	}
	// warmUp samples of each way, alternating; the fastest of them sets
	// the estimate.
	for i, d := range []time.Duration{900, 700, 130, 65, 500, 80} {
		want := i % 2
		if got := p.Pick(mib, tick()); got != want {
			t.Fatalf("pick %d = %d, want %d", i, got, want)
		}
		if _, known := p.Faster(mib); known {
			t.Fatalf("Faster known after %d samples", i)
		}
		p.Learn(want, mib, d*time.Microsecond)
	}
	if e0, e1 := p.Estimate(0, mib), p.Estimate(1, mib); e0 != float64(float32(130e3)/mib) || e1 != float64(float32(65e3)/mib) {
		t.Fatalf("estimates %v, %v: want the fastest warm-up samples", e0, e1)
	}
	// The first earlyCalls calls after warm-up: no try, the other way
	// being twice as slow (earlyGap).
	tries := 0
	for i := 0; i < earlyCalls; i++ {
		if p.Pick(mib, tick()) == 0 {
			tries++
		}
	}
	if tries != 0 {
		t.Errorf("%d tries in the first %d calls after warm-up, the other way at 2×: want none", tries, earlyCalls)
	}
	// Ways closer than earlyGap: a try every earlyEvery calls.
	var near Pair
	const kib = 256 << 10
	for i := range 2 * warmUp {
		near.Learn(near.Pick(kib, tick()), kib, time.Duration(100-i%2*30)*time.Microsecond)
	}
	tries = 0
	for i := 0; i < earlyCalls; i++ {
		if near.Pick(kib, tick()) == 0 {
			tries++
		}
	}
	if tries != earlyCalls/earlyEvery {
		t.Errorf("%d tries in the first %d calls after warm-up, the other way at 1.4×: want %d", tries, earlyCalls, earlyCalls/earlyEvery)
	}
	// 1 ms a call: a try of way 0 every ProbeInterval (50 calls), but not
	// before ProbeCalls (64) calls.
	tries = 0
	for i := 0; i < 10*ProbeCalls; i++ {
		if p.Pick(mib, tick()) == 0 {
			tries++
		}
	}
	if tries != 10 {
		t.Errorf("%d tries of the slower way in %d calls of 1 ms, want 10", tries, 10*ProbeCalls)
	}
	// 100 µs a call: one try per ProbeInterval (500 calls); 10 µs a call:
	// one per ProbeMaxCalls calls.
	for _, step := range []time.Duration{100 * time.Microsecond, 10 * time.Microsecond} {
		tries = 0
		for i := 0; i < 20000; i++ {
			now = now.Add(step)
			if p.Pick(mib, now) == 0 {
				tries++
			}
		}
		want := 20000 / min(ProbeMaxCalls, int(ProbeInterval/step))
		if tries < want-1 || tries > want+1 {
			t.Errorf("%d tries in 20000 calls of %v, want %d", tries, step, want)
		}
	}
	if way, known := p.Faster(mib); way != 1 || !known {
		t.Errorf("Faster = %d, %v; want 1, known", way, known)
	}
	if got := p.Pick(64<<10, tick()); got != 0 {
		t.Errorf("first pick of 64 KiB = %d, want way 0", got)
	}
	before := p.Estimate(1, mib)
	p.Learn(1, mib, 2*65*time.Microsecond) // a late peer
	if up, want := p.Estimate(1, mib)-before, (2*before-before)/8; up < want*0.99 || up > want*1.01 {
		t.Errorf("a slower sample moved the estimate by %v, want an eighth of the way (%v)", up, want)
	}
	before = p.Estimate(1, mib)
	p.Learn(1, mib, 100*65*time.Microsecond) // a call that lost the core
	if got, want := p.Estimate(1, mib), before*maxRise; got < want*0.99 || got > want*1.01 {
		t.Errorf("a sample 100× slower set the estimate to %v, want at most %v× (%v)", got, maxRise, want)
	}
	before = p.Estimate(1, mib)
	p.Learn(1, mib, 30*time.Microsecond)
	if got, want := p.Estimate(1, mib), (before+30e3/mib)/2; got < want*0.99 || got > want*1.01 {
		t.Errorf("a faster sample set the estimate to %v, want halfway (%v)", got, want)
	}
	// Way 0 becomes faster: the next try sees it, and it is taken.
	for p.Pick(mib, tick()) != 0 {
	}
	for i := 0; i < 3; i++ {
		p.Learn(0, mib, 10*time.Microsecond)
	}
	if got := p.Pick(mib, tick()); got != 0 {
		t.Errorf("after faster samples of way 0, pick = %d", got)
	}
	p.Learn(0, 0, time.Second)
	p.Learn(0, mib, 0)
	if Class(1) != 0 || Class(8<<10) != 1 || Class(1<<20) != 8 || Class(1<<40) != Classes-1 {
		t.Errorf("classes: %d %d %d %d", Class(1), Class(8<<10), Class(1<<20), Class(1<<40))
	}
	// Hysteresis: a way 5% faster does not take over; 22% does.
	var q Pair
	for i := 0; i < 2*warmUp; i++ {
		q.Learn(i%2, mib, 100*time.Microsecond)
	}
	q.Learn(1, mib, 90*time.Microsecond) // way 1: 95
	if way, _ := q.Faster(mib); way != 0 {
		t.Errorf("a way 5%% faster took over")
	}
	q.Learn(1, mib, 60*time.Microsecond) // 77.5
	if way, _ := q.Faster(mib); way != 1 {
		t.Errorf("a way 22%% faster did not take over")
	}
}

// TestLearnFaster: LearnFaster reports the faster way once the warm-up
// is complete and again only when a sample changes it.
func TestLearnFaster(t *testing.T) {
	var p Pair
	const n = 64 << 10
	for i := range 2*warmUp - 1 {
		if _, changed := p.LearnFaster(i%2, n, time.Duration(100-i%2*50)*time.Microsecond); changed {
			t.Fatalf("sample %d: changed before the warm-up ended", i)
		}
	}
	if way, changed := p.LearnFaster(1, n, 50*time.Microsecond); way != 1 || !changed {
		t.Fatalf("last warm-up sample: way %d, changed %v; want 1, true", way, changed)
	}
	if way, changed := p.LearnFaster(1, n, 60*time.Microsecond); way != 1 || changed {
		t.Fatalf("a slower sample of the faster way: way %d, changed %v; want 1, false", way, changed)
	}
	for range 8 {
		p.Learn(0, n, 10*time.Microsecond)
	}
	if way, changed := p.LearnFaster(0, n, 10*time.Microsecond); way != 0 || changed {
		t.Fatalf("after way 0 became faster by Learn: way %d, changed %v; want 0, false", way, changed)
	}
	var q Pair
	for i := range 2 * warmUp {
		q.Learn(i%2, n, time.Duration(100-i%2*50)*time.Microsecond)
	}
	for i := 0; ; i++ {
		way, changed := q.LearnFaster(0, n, 10*time.Microsecond)
		if changed {
			if way != 0 {
				t.Fatalf("change to way %d, want 0", way)
			}
			break
		}
		if i == 10 {
			t.Fatal("way 0 ten times faster never took over")
		}
	}
}
