package fabric

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestDomainOptions: each domain carries its own fast-call mode, poll pace
// and poll yield into the CQs, counters and endpoints opened from it (the
// C stack's argument block included), two domains with different settings
// live side by side, and a bad option fails OpenDomain with ErrInvalid.
func TestDomainOptions(t *testing.T) {
	t.Parallel()
	slow := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, WithFastCall(FastCallAuto), WithPollPace(maxPollPace), WithPollYield(3*time.Millisecond))
	fast := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, WithFastCall(FastCallOff), WithPollPace(0), WithPollYield(0))
	if d := slow.dom; d.FastCall() != FastCallAuto || d.PollPace() != maxPollPace || d.PollYield() != 3*time.Millisecond {
		t.Errorf("domain settings %v, %d, %v", d.FastCall(), d.PollPace(), d.PollYield())
	}
	if d := fast.dom; d.FastCall() != FastCallOff || d.PollPace() != 0 || d.PollYield() != 0 {
		t.Errorf("domain settings %v, %d, %v", d.FastCall(), d.PollPace(), d.PollYield())
	}
	for _, c := range []struct {
		p          *pair
		pace       int
		yield      time.Duration
		wantStacks bool
	}{{slow, maxPollPace, 3 * time.Millisecond, fastSupported()}, {fast, 0, 0, false}} {
		cq := c.p.a.cq
		if int(cq.pace) != c.pace || cq.yield.every != int64(c.yield) {
			t.Errorf("CQ: pace %d, yield %v; want %d, %v", cq.pace, time.Duration(cq.yield.every), c.pace, c.yield)
		}
		if (cq.fast != nil) != c.wantStacks || (c.p.a.ep.fast != nil) != c.wantStacks {
			t.Errorf("fast stacks %v %v, want %v", cq.fast != nil, c.p.a.ep.fast != nil, c.wantStacks)
		}
		if cq.fast != nil && int(cq.fast.args.pace) != c.pace {
			t.Errorf("fast stack's pace %d, want %d", cq.fast.args.pace, c.pace)
		}
		cn, err := c.p.dom.OpenCounter()
		if err != nil {
			t.Fatal(err)
		}
		if int(cn.pace) != c.pace {
			t.Errorf("counter pace %d, want %d", cn.pace, c.pace)
		}
	}
	for _, bad := range []DomainOption{WithFastCall(FastCall(7)), WithFastCall(-1), WithPollPace(-1), WithPollPace(maxPollPace + 1), WithPollYield(-time.Second)} {
		d, err := slow.fab.OpenDomain(slow.info, bad)
		if !errors.Is(err, ErrInvalid) {
			d.Close()
			t.Errorf("bad option: %v, want ErrInvalid", err)
		}
	}
	d, err := slow.fab.OpenDomain(slow.info, nil) // a nil option is ignored
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
}

// TestPollPaceSpacesEmptyPolls spins on an empty CQ with the longest pace
// and with none, through both entry paths (fast calls and cgo): each of
// the 200 empty rounds then reads the clock 8 times, so the paced spin
// must take longer by at least about the time of those reads, measured
// here by the same pacing loop without the polls (half of it is
// required, so that a loaded machine does not decide the result). The
// fastest of five tries of each is compared, so a descheduled try cannot
// turn the result around.
func TestPollPaceSpacesEmptyPolls(t *testing.T) {
	var reads []time.Duration
	for range 5 {
		reads = append(reads, paceTime(200, maxPollPace))
	}
	pacing := slices.Min(reads)
	for _, mode := range []FastCall{FastCallOn, FastCallOff} {
		t.Run(mode.String(), func(t *testing.T) {
			var out [4]Completion
			spin := func(reads int) time.Duration {
				p := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, WithFastCall(mode), WithPollPace(reads))
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
			t.Logf("200 empty polls: %v back to back, %v paced by %d clock reads; the pacing alone takes %v", back, paced, maxPollPace, pacing)
			if paced-back < pacing/2 {
				t.Errorf("paced spin took %v, the unpaced %v: not the %v of the pacing longer", paced, back, pacing)
			}
		})
	}
}
