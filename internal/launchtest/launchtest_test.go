package launchtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/bootstrap"
	"github.com/weft-hpc/weft/internal/testenv"
)

func TestExchange(t *testing.T) {
	if !IsWorker() {
		Run(t, 3, "shm", 30*time.Second, "WEFT_LT_EXTRA=yes")
		return
	}
	if os.Getenv("WEFT_PROVIDER") != "shm" || os.Getenv("WEFT_LT_EXTRA") != "yes" {
		t.Fatalf("worker env: WEFT_PROVIDER=%q WEFT_LT_EXTRA=%q", os.Getenv("WEFT_PROVIDER"), os.Getenv("WEFT_LT_EXTRA"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bs, err := bootstrap.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Finalize()
	if bs.Size() != 3 || bs.Kind() != "fabrun" {
		t.Fatalf("size %d kind %s", bs.Size(), bs.Kind())
	}
	if err := bs.Put("n."+strconv.Itoa(bs.Rank()), []byte{byte(bs.Rank() * 10)}); err != nil {
		t.Fatal(err)
	}
	if err := bs.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	for r := range bs.Size() {
		v, err := bs.Get(ctx, "n."+strconv.Itoa(r))
		if err != nil || len(v) != 1 || v[0] != byte(r*10) {
			t.Fatalf("value of rank %d: %v %v", r, v, err)
		}
	}
}

func TestSub(t *testing.T) {
	t.Run("a b/c", func(t *testing.T) {
		if !IsWorker() {
			Run(t, 2, "", 30*time.Second)
			return
		}
		fmt.Println("subtest worker", os.Getenv("PMI_RANK"))
	})
}

// TestAllSkip: when every rank skips, run reports the skip and its reason
// (Run then skips the parent test with it). The ranks skip on purpose, so
// the parent clears WEFT_REQUIRE for them: the probe feature is never
// missing from this machine, only from this test's ranks.
func TestAllSkip(t *testing.T) {
	if !IsWorker() {
		out, skip, err := run(t.Name(), 2, "", 30*time.Second, []string{"WEFT_REQUIRE=", "WEFT_REQUIRE_PROVIDERS="})
		if err != nil {
			t.Fatalf("ranks that skip: %v\n%s", err, out)
		}
		if !strings.Contains(skip, "nothing to see") {
			t.Errorf("skip reason %q, want the ranks' own\n%s", skip, out)
		}
		return
	}
	testenv.Skip(t, "launchtest-skip-probe", "nothing to see")
}

// TestFailingWorker is a worker that fails on rank 1 when asked to; the
// parent side checks that run reports it.
func TestFailingWorker(t *testing.T) {
	if !IsWorker() {
		start := time.Now()
		out, _, err := run(t.Name(), 3, "", 20*time.Second, []string{"WEFT_LT_FAIL=1"})
		if err == nil || !strings.Contains(err.Error(), "rank 1 exited with status 1") {
			t.Fatalf("err = %v\n%s", err, out)
		}
		if !strings.Contains(out, "[1]     launchtest_test.go") || !strings.Contains(out, "rank one fails") {
			t.Errorf("failure message missing from output:\n%s", out)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("took %v", took)
		}
		// A test name that matches nothing is an error, not a silent pass.
		if out, _, err := run("TestNoSuchTest", 2, "", 20*time.Second, nil); err == nil {
			t.Errorf("unknown test name passed:\n%s", out)
		}
		return
	}
	if os.Getenv("WEFT_LT_FAIL") == "1" && os.Getenv("PMI_RANK") == "1" {
		t.Fatal("rank one fails")
	}
	time.Sleep(20 * time.Second) // killed by the launcher
}

func TestPattern(t *testing.T) {
	if got := Pattern("TestA/b.c/(x)"); got != `^TestA$/^b\.c$/^\(x\)$` {
		t.Errorf("Pattern = %s", got)
	}
}

// TestMayDie: rank 1 kills itself and rank 2 exits without finalising
// while rank 0 still runs; rank 0 passes, so the job does.
func TestMayDie(t *testing.T) {
	if !IsWorker() {
		RunMayDie(t, 3, "", 30*time.Second, []int{1, 2})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bs, err := bootstrap.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	switch bs.Rank() {
	case 1:
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case 2:
		os.Exit(0)
	}
	defer bs.Finalize()
}

// TestSkipReasonInterleaved: the skip reason is found when another rank's
// lines come between rank 0's reason and its SKIP line (untagged ranks
// write at once).
func TestSkipReasonInterleaved(t *testing.T) {
	out := "[0] === RUN   TestX\n" +
		"[0]     x_test.go:74: probe missing: nothing to see\n" +
		"[1] === RUN   TestX\n" +
		"[0] --- SKIP: TestX (0.00s)\n" +
		"[1]     x_test.go:74: probe missing: nothing to see\n" +
		"[1] --- SKIP: TestX (0.00s)\n"
	skip, err := checkRanks(out, "TestX", []int{0, 1})
	if err != nil || skip != "probe missing: nothing to see" {
		t.Errorf("checkRanks = %q, %v", skip, err)
	}
}
