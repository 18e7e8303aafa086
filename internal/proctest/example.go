package proctest

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// RunExample runs the example program prog as n ranks under fabrun (the
// local launcher, the shm provider, tagged output; 45 s for the job, the
// program given -timeout 30s before args) with extra environment, and
// fails tb if any of its processes outlives it.
func RunExample(tb testing.TB, fabrun, prog string, n int, env []string, args ...string) Result {
	tb.Helper()
	mark := Marker()
	argv := []string{"-n", fmt.Sprint(n), "--launcher", "local", "--provider", "shm", "--tag-output",
		"--timeout", "45s", "--env", mark, prog, "-timeout", "30s"}
	r := Run(tb, 60*time.Second, env, "", fabrun, append(argv, args...)...)
	if left := WaitGone(mark, 5*time.Second); len(left) > 0 {
		tb.Errorf("processes left behind: %v", left)
	}
	return r
}

// Alone makes the test's process a job of one rank wherever the test
// runs: the launchers' variables unset (restored after the test) and the
// shm provider.
func Alone(t *testing.T) {
	t.Helper()
	for _, k := range []string{"PMI_FD", "PMI_PORT", "PMI_ID", "WEFT_PMI", "SLURM_MPI_TYPE", "PMI_JOBID"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Setenv(k, v)
			os.Unsetenv(k)
		}
	}
	t.Setenv("WEFT_PROVIDER", "shm")
}
