// Package launchtest runs multi-process tests from "go test": the calling
// test re-executes its own test binary as n ranks under weft's local launcher
// (internal/launch, the engine of fabrun, run in-process), each rank running
// only that test with WEFT_TEST_WORKER=1.
//
//	func TestRing(t *testing.T) {
//		if !launchtest.IsWorker() {
//			launchtest.Run(t, 4, "shm", 30*time.Second)
//			return
//		}
//		bs, err := bootstrap.Init(ctx) // this is rank bs.Rank() of 4
//		...
//	}
//
// In a worker the test body uses t.Fatal and friends as usual: a failing rank
// exits non-zero, the launcher kills the other ranks, and Run fails the
// parent test with every rank's output, each line prefixed "[rank] ". When
// every rank skips (t.Skip), the parent test is skipped with the same
// reason.
package launchtest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/launch"

	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// IsWorker reports whether this process is a rank started by Run.
func IsWorker() bool { return os.Getenv("WEFT_TEST_WORKER") == "1" }

// Run re-executes the current test binary as n ranks under weft's local
// launcher, running only the calling test (t.Name()) with
// WEFT_TEST_WORKER=1, WEFT_PROVIDER=provider (when not empty) and the extra
// KEY=VALUE entries in env. It fails t with every rank's output if a rank
// fails or does not run the test, or if timeout passes (then every rank is
// killed). Before the ranks are ended, by the timeout or by a failing
// rank, those still running write their goroutine stacks into the output.
// The timeout is shortened to fit the test binary's own deadline.
func Run(t *testing.T, n int, provider string, timeout time.Duration, env ...string) {
	t.Helper()
	if IsWorker() {
		t.Fatal("launchtest.Run called inside a worker; guard it with launchtest.IsWorker()")
	}
	testenv.Provider(t, provider)
	if dl, ok := t.Deadline(); ok {
		if left := time.Until(dl) - 2*time.Second; left < timeout {
			timeout = max(left, time.Second)
		}
	}
	out, skip, err := run(t.Name(), n, provider, timeout, env)
	if err != nil {
		t.Fatalf("launchtest: %d ranks of %s: %v\n%s", n, t.Name(), err, out)
	}
	if skip != "" {
		t.Skipf("every rank skipped: %s", skip)
	}
	t.Logf("%d ranks of %s passed; their output:\n%s", n, t.Name(), out)
}

// Pattern returns the -test.run expression that selects exactly the test
// (or subtest) called name.
func Pattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

var skipRE = regexp.MustCompile(`(?m)^\[0\] +[^\n]*\.go:\d+: (.*)\n\[0\] *--- SKIP`)

// rankLines returns the lines of out that rank r wrote (tagged "[r] "),
// so that a rank's consecutive lines are adjacent whatever the other
// ranks wrote in between.
func rankLines(out string, r int) string {
	tag := fmt.Sprintf("[%d] ", r)
	var b strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(line, tag) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// run launches the workers and checks that every rank ran and passed name.
func run(name string, n int, provider string, timeout time.Duration, env []string) (out, skip string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("test binary: %w", err)
	}
	var buf proctest.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Second)
	defer cancel()
	err = launch.Run(ctx, launch.Config{
		NP:       n,
		Launcher: "local", // never srun, even inside a Slurm allocation
		Argv:     []string{exe, "-test.run", Pattern(name), "-test.count=1", "-test.v=true", "-test.timeout=" + (timeout + 2*time.Second).String()},
		Env:      append([]string{"WEFT_TEST_WORKER=1"}, env...),
		Provider: provider,
		Timeout:  timeout,
		// A hang shows where every rank waits: on the timeout, and when one
		// rank fails (its own deadline passed) while the others still run.
		TimeoutStacks: true,
		FailStacks:    true,
		TagOutput:     true,
		Stdout:        &buf,
		Stderr:        &buf,
	})
	out = buf.String()
	if err != nil {
		return out, "", err
	}
	ranks := make([]int, n)
	for r := range ranks {
		ranks[r] = r
	}
	skip, err = checkRanks(out, name, ranks)
	return out, skip, err
}

// checkRanks checks that every rank in ranks ran and passed name (or
// every one skipped it: the reason is returned).
func checkRanks(out, name string, ranks []int) (skip string, err error) {
	skipped := 0
	for _, r := range ranks {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^\[%d\] *--- (PASS|SKIP): %s \(`, r, regexp.QuoteMeta(name)))
		m := re.FindStringSubmatch(out)
		switch {
		case m == nil:
			return "", fmt.Errorf("rank %d did not run and pass %s (does the name match?)", r, name)
		case m[1] == "SKIP":
			skipped++
		}
	}
	if skipped == len(ranks) && skipped > 0 {
		skip = "see output"
		if m := skipRE.FindStringSubmatch(rankLines(out, 0)); m != nil {
			skip = m[1]
		}
		return skip, nil
	}
	if skipped > 0 {
		return "", fmt.Errorf("%d of %d ranks skipped %s, the others ran it", skipped, len(ranks), name)
	}
	return "", nil
}
