package launchtest

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// Native names, in place of a libfabric provider, weft's node transport
// between the ranks (RunOn).
const Native = "native"

// RunOn is Run for the tests of layers above endpoint that run over
// either weft's node transport or a libfabric provider with every peer on
// libfabric: in a worker it returns false at once; otherwise it runs the
// calling test as n ranks and returns true. provider Native runs them on
// shm with WEFT_NODE_TRANSPORT=native, any other provider with
// WEFT_NODE_TRANSPORT=fabric. The ranks learn the parent's -short from
// WEFT_TEST_SHORT (Short).
func RunOn(t *testing.T, n int, provider string, timeout time.Duration, env ...string) bool {
	t.Helper()
	if IsWorker() {
		return false
	}
	if provider == Native {
		provider, env = "shm", append(env, "WEFT_NODE_TRANSPORT=native")
	} else {
		env = append(env, "WEFT_NODE_TRANSPORT=fabric")
	}
	Run(t, n, provider, timeout, append(env, fmt.Sprintf("WEFT_TEST_SHORT=%v", testing.Short()))...)
	return true
}

// Short is testing.Short, also in the ranks RunOn starts (they run
// without -test.short).
func Short() bool { return testing.Short() || os.Getenv("WEFT_TEST_SHORT") == "true" }

// AsSingleton makes the calling test run as a job of one rank (no
// launcher), wherever it starts: it clears every launcher's variables for
// the test's duration.
func AsSingleton(t *testing.T) {
	t.Helper()
	for _, k := range []string{"PMI_FD", "PMI_PORT", "PMI_ID", "WEFT_PMI", "SLURM_MPI_TYPE", "PMI_JOBID"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Setenv(k, v)
			os.Unsetenv(k)
		}
	}
}
