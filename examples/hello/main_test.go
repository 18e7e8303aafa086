package main

import (
	"os"
	"testing"
)

// TestSingleton runs hello in-process as a job of one rank (no launcher):
// the ring is a send to itself over the selected provider.
func TestSingleton(t *testing.T) {
	for _, k := range []string{"PMI_FD", "PMI_PORT", "PMI_ID", "WEFT_PMI", "SLURM_MPI_TYPE", "PMI_JOBID"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Setenv(k, v)
			os.Unsetenv(k)
		}
	}
	t.Setenv("WEFT_PROVIDER", "shm")
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
