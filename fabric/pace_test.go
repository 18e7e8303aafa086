package fabric

import (
	"slices"
	"testing"
	"time"
)

func TestSetPollPace(t *testing.T) {
	orig := SetPollPace(3)
	t.Cleanup(func() { SetPollPace(orig) })
	for _, c := range []struct{ set, want int }{{7, 3}, {-5, 7}, {1000, 0}, {1, maxPollPace}} {
		if got := SetPollPace(c.set); got != c.want {
			t.Errorf("SetPollPace(%d) returned %d, want the previous setting %d", c.set, got, c.want)
		}
	}
}

// TestPollPaceSpacesEmptyPolls spins on an empty CQ with the longest pace
// and with none, through both entry paths (fast calls and cgo): each of
// the 200 empty rounds then reads the clock 8 times, so the paced spin
// must take several times as long. The fastest of five tries of each is
// compared, so a descheduled try cannot turn the result around.
func TestPollPaceSpacesEmptyPolls(t *testing.T) {
	for _, mode := range []FastCall{FastCallOn, FastCallOff} {
		t.Run(mode.String(), func(t *testing.T) {
			prev := SetFastCall(mode)
			p := newPair(t, Hints{Provider: "shm", Caps: CapMsg})
			SetFastCall(prev)
			orig := SetPollPace(0)
			t.Cleanup(func() { SetPollPace(orig) })
			var out [4]Completion
			spin := func(reads int) time.Duration {
				SetPollPace(reads)
				var ds []time.Duration
				for range 5 {
					t0 := time.Now()
					n, err := p.a.cq.ReadSpin(out[:], 200)
					ds = append(ds, time.Since(t0))
					if n != 0 || err != nil {
						t.Fatalf("ReadSpin on an empty CQ = %d, %v", n, err)
					}
				}
				return slices.Min(ds)
			}
			back, paced := spin(0), spin(maxPollPace)
			t.Logf("200 empty polls: %v back to back, %v paced by %d clock reads", back, paced, maxPollPace)
			if paced < 4*back {
				t.Errorf("paced spin took %v, not clearly longer than the unpaced %v", paced, back)
			}
		})
	}
}
