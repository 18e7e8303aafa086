package endpoint

import (
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

// TestWayChooser: a size class tries the pipelined copy and the single
// copy twice each (the second sample replacing the first), then takes the
// faster but for one send in wayProbeEvery; a faster sample moves an estimate halfway
// down, a slower one an eighth up; classes are independent.
func TestWayChooser(t *testing.T) {
	if _, fixed := fixedWay(); fixed {
		testenv.Skip(t, "nodeway", "WEFT_TUNE sets nodeway") // the override is tested between processes (TestNodeWay)
	}
	var w wayChooser
	const mib = 1 << 20
	if got, known := w.faster(wayClass(mib)); got != wayPipe || known {
		t.Fatalf("faster before any measurement = %d, %v; want the pipelined copy, unknown", got, known)
	}
	// Two samples of each way, alternating; the second replaces the first.
	for i, d := range []time.Duration{900, 700, 130, 65} {
		want := []int{wayPipe, waySingle}[i%2]
		if got := w.pick(mib); got != want {
			t.Fatalf("pick %d = %d, want %d", i, got, want)
		}
		if _, known := w.faster(wayClass(mib)); i < 3 && known {
			t.Fatalf("faster known after %d samples", i)
		}
		w.learn(want, mib, d*time.Microsecond)
	}
	c := wayClass(mib)
	if p, s := w.est[wayPipe][c], w.est[waySingle][c]; p != float32(130e3)/mib || s != float32(65e3)/mib {
		t.Fatalf("estimates %v, %v: the second samples should have replaced the first", p, s)
	}
	singles := 0
	for i := 0; i < 2*wayProbeEvery; i++ {
		if w.pick(mib) == waySingle {
			singles++
		}
	}
	if singles != 2*wayProbeEvery-2 {
		t.Errorf("%d of %d picks took the faster single copy, want all but 2 probes", singles, 2*wayProbeEvery)
	}
	if got, known := w.faster(wayClass(mib)); got != waySingle || !known {
		t.Errorf("faster = %d, %v; want the single copy, known", got, known)
	}
	// Another class is measured on its own.
	if got := w.pick(64 << 10); got != wayPipe {
		t.Errorf("first pick of 64 KiB = %d, want the pipelined copy", got)
	}
	before := w.est[waySingle][c]
	w.learn(waySingle, mib, 4*65*time.Microsecond) // a late receiver
	up := w.est[waySingle][c] - before
	if want := (4*before - before) / 8; up < want*0.99 || up > want*1.01 {
		t.Errorf("a slower sample moved the estimate by %v, want an eighth of the way (%v)", up, want)
	}
	before = w.est[waySingle][c]
	w.learn(waySingle, mib, 30*time.Microsecond)
	if got, want := w.est[waySingle][c], (before+float32(30e3)/mib)/2; got < want*0.99 || got > want*1.01 {
		t.Errorf("a faster sample set the estimate to %v, want halfway (%v)", got, want)
	}
	// The placement changes: the pipelined copy becomes faster, seen by
	// the next probe, and then chosen.
	for w.pick(mib) != wayPipe {
	}
	for i := 0; i < 3; i++ { // halfway down each time
		w.learn(wayPipe, mib, 10*time.Microsecond)
	}
	if got := w.pick(mib); got != wayPipe {
		t.Errorf("after faster pipelined samples, pick = %d", got)
	}
	if wayClass(1) != 0 || wayClass(64<<10) != 1 || wayClass(1<<30) != wayClasses-1 || wayClass(1<<62) != wayClasses-1 {
		t.Errorf("size classes: %d %d %d %d", wayClass(1), wayClass(64<<10), wayClass(1<<30), wayClass(1<<62))
	}
}
