package fabric

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// The process-wide defaults (SetFastCall, SetPollPace, SetPollYield and
// their environment variables) are tested in a child process: the test
// binary re-executed with defaultsChildEnv set, so that no test of the
// parallel test process changes them.
const defaultsChildEnv = "WEFT_FABRIC_DEFAULTS_CHILD"

// TestProcessDefaults: WEFT_FASTCALL and WEFT_TUNE's pollpace and pollyield
// are the initial defaults; the setters return the previous default, clamp
// (or, for the fast-call mode, reset) values out of range, and apply to
// domains opened later while domains already open keep their settings;
// options override the defaults.
func TestProcessDefaults(t *testing.T) {
	t.Parallel()
	if _, err := GetInfo(&Hints{Provider: "shm"}); err != nil {
		skipNoProvider(t, "shm", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), defaultsChildEnv+"=1", "WEFT_FASTCALL=on", "WEFT_TUNE=pollpace=3,pollyield=5ms")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// defaultsChild is the child of TestProcessDefaults; it returns the exit
// code.
func defaultsChild() int {
	if err := checkDefaults(); err != nil {
		fmt.Fprintln(os.Stderr, "defaults child:", err)
		return 1
	}
	return 0
}

func checkDefaults() error {
	infos, err := GetInfo(&Hints{Provider: "shm", Caps: CapMsg})
	if err != nil {
		return err
	}
	fab, err := OpenFabric(infos[0])
	if err != nil {
		return err
	}
	defer fab.Close()
	type want struct {
		fast  FastCall
		pace  int
		yield time.Duration
	}
	check := func(what string, d *Domain, w want) error {
		cq, err := d.OpenCQ(16)
		if err != nil {
			return err
		}
		got := want{d.FastCall(), d.PollPace(), d.PollYield()}
		if got != w || int(cq.pace) != w.pace || cq.yield.every != int64(w.yield) {
			return fmt.Errorf("%s: domain %+v, CQ pace %d yield %v; want %+v", what, got, cq.pace, time.Duration(cq.yield.every), w)
		}
		return nil
	}
	d1, err := fab.OpenDomain(infos[0])
	if err != nil {
		return err
	}
	if err := check("from the environment", d1, want{FastCallOn, 3, 5 * time.Millisecond}); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		set  func() any
		prev any
	}{
		{"SetFastCall(off)", func() any { return SetFastCall(FastCallOff) }, FastCallOn},
		{"SetFastCall(-3)", func() any { return SetFastCall(FastCall(-3)) }, FastCallOff},
		{"SetPollPace(7)", func() any { return SetPollPace(7) }, 3},
		{"SetPollPace(-5)", func() any { return SetPollPace(-5) }, 7},
		{"SetPollPace(1000)", func() any { return SetPollPace(1000) }, 0},
		{"SetPollYield(-1s)", func() any { return SetPollYield(-time.Second) }, 5 * time.Millisecond},
		{"SetPollYield(2ms)", func() any { return SetPollYield(2 * time.Millisecond) }, time.Duration(0)},
	} {
		if got := c.set(); got != c.prev {
			return fmt.Errorf("%s returned %v, want the previous default %v", c.name, got, c.prev)
		}
	}
	d2, err := fab.OpenDomain(infos[0])
	if err != nil {
		return err
	}
	if err := check("after the setters", d2, want{FastCallAuto, maxPollPace, 2 * time.Millisecond}); err != nil {
		return err
	}
	if err := check("opened before the setters", d1, want{FastCallOn, 3, 5 * time.Millisecond}); err != nil {
		return err
	}
	d3, err := fab.OpenDomain(infos[0], WithFastCall(FastCallOff), WithPollPace(1), WithPollYield(0))
	if err != nil {
		return err
	}
	return check("with options", d3, want{FastCallOff, 1, 0})
}
