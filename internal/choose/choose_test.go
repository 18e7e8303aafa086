package choose

import (
	"testing"
	"time"
)

// TestPair: a size class tries way 0 and way 1 twice each (the second
// sample replacing the first), then takes the faster but for one call in
// ProbeEvery; a faster sample moves an estimate halfway down, a slower
// one an eighth up; classes are independent; a change of the faster way
// is seen by a probe and then followed.
func TestPair(t *testing.T) {
	var p Pair
	const mib = 1 << 20
	if way, known := p.Faster(mib); way != 0 || known {
		t.Fatalf("Faster before any sample = %d, %v", way, known)
	}
	for i, d := range []time.Duration{900, 700, 130, 65} {
		want := i % 2
		if got := p.Pick(mib); got != want {
			t.Fatalf("pick %d = %d, want %d", i, got, want)
		}
		if _, known := p.Faster(mib); known {
			t.Fatalf("Faster known after %d samples", i)
		}
		p.Learn(want, mib, d*time.Microsecond)
	}
	if e0, e1 := p.Estimate(0, mib), p.Estimate(1, mib); e0 != float64(float32(130e3)/mib) || e1 != float64(float32(65e3)/mib) {
		t.Fatalf("estimates %v, %v: the second samples should have replaced the first", e0, e1)
	}
	ones := 0
	for i := 0; i < 2*ProbeEvery; i++ {
		if p.Pick(mib) == 1 {
			ones++
		}
	}
	if ones != 2*ProbeEvery-2 {
		t.Errorf("%d of %d picks took the faster way 1, want all but 2 probes", ones, 2*ProbeEvery)
	}
	if way, known := p.Faster(mib); way != 1 || !known {
		t.Errorf("Faster = %d, %v; want 1, known", way, known)
	}
	if got := p.Pick(64 << 10); got != 0 {
		t.Errorf("first pick of 64 KiB = %d, want way 0", got)
	}
	before := p.Estimate(1, mib)
	p.Learn(1, mib, 4*65*time.Microsecond) // a late peer
	if up, want := p.Estimate(1, mib)-before, (4*before-before)/8; up < want*0.99 || up > want*1.01 {
		t.Errorf("a slower sample moved the estimate by %v, want an eighth of the way (%v)", up, want)
	}
	before = p.Estimate(1, mib)
	p.Learn(1, mib, 30*time.Microsecond)
	if got, want := p.Estimate(1, mib), (before+30e3/mib)/2; got < want*0.99 || got > want*1.01 {
		t.Errorf("a faster sample set the estimate to %v, want halfway (%v)", got, want)
	}
	// Way 0 becomes faster: the next probe sees it, and it is chosen.
	for p.Pick(mib) != 0 {
	}
	for i := 0; i < 3; i++ {
		p.Learn(0, mib, 10*time.Microsecond)
	}
	if got := p.Pick(mib); got != 0 {
		t.Errorf("after faster samples of way 0, pick = %d", got)
	}
	p.Learn(0, 0, time.Second)
	p.Learn(0, mib, 0)
	if Class(1) != 0 || Class(8<<10) != 1 || Class(1<<20) != 8 || Class(1<<40) != Classes-1 {
		t.Errorf("classes: %d %d %d %d", Class(1), Class(8<<10), Class(1<<20), Class(1<<40))
	}
}
