package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
)

var bins = proctest.NewBuilder("github.com/weft-hpc/weft/cmd/fabrun", "github.com/weft-hpc/weft/examples/coupled")

func TestMain(m *testing.M) {
	code := m.Run()
	bins.Close()
	os.Exit(code)
}

// runCoupled runs the example as an MPMD job under fabrun: atm ranks of
// the first program, ocn of the second (ocn 0: a job of one program).
func runCoupled(t *testing.T, atm, ocn int, env []string, args ...string) proctest.Result {
	t.Helper()
	fab, prog := bins.Path(t, "fabrun"), bins.Path(t, "coupled")
	mark := proctest.Marker()
	argv := []string{"-n", fmt.Sprint(atm), "--launcher", "local", "--provider", "shm", "--tag-output", "--timeout", "45s", "--env", mark, prog}
	argv = append(argv, args...)
	if ocn > 0 {
		argv = append(append(argv, ":", "-n", fmt.Sprint(ocn), prog), args...)
	}
	r := proctest.Run(t, 60*time.Second, env, "", fab, argv...)
	if left := proctest.WaitGone(mark, 5*time.Second); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
	return r
}

// TestCoupled runs the two models on different numbers of ranks, on both
// node transports, and checks every rank's line and both models' serial
// check.
func TestCoupled(t *testing.T) {
	for _, c := range []struct {
		name     string
		atm, ocn int
		env      []string
	}{
		{"2+3", 2, 3, nil},
		{"3+1", 3, 1, nil},
		{"2+2-libfabric", 2, 2, []string{"WEFT_NODE_TRANSPORT=fabric"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCoupled(t, c.atm, c.ocn, c.env, "-points", "997", "-steps", "30")
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			n := c.atm + c.ocn
			for rank := range n {
				model, m, k := "atmosphere", rank, c.atm
				if rank >= c.atm {
					model, m, k = "ocean", rank-c.atm, c.ocn
				}
				if want := fmt.Sprintf("[%d] rank %d of %d (%s rank %d of %d): points ", rank, rank, n, model, m, k); !strings.Contains(r.Stdout, want) {
					t.Errorf("missing %q in:\n%s", want, r.Stdout)
				}
			}
			for _, want := range []string{
				fmt.Sprintf("[0] coupled: atmosphere, %d ranks, 997 points, 30 steps, max |diff| 0 vs serial\n", c.atm),
				fmt.Sprintf("[%d] coupled: ocean, %d ranks, 997 points, 30 steps, max |diff| 0 vs serial\n", c.atm, c.ocn),
			} {
				if !strings.Contains(r.Stdout, want) {
					t.Errorf("missing %q in:\n%s", want, r.Stdout)
				}
			}
		})
	}
}

// TestCoupledNeedsTwoPrograms: a job of one program is a usage error.
func TestCoupledNeedsTwoPrograms(t *testing.T) {
	r := runCoupled(t, 2, 0, nil)
	if r.Code != 2 || !strings.Contains(r.Stderr, "a job of one program") {
		t.Errorf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
