package main

import (
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/launchtest"
)

// TestPGAS runs the program as 4 ranks with direct stores and as 3 ranks
// through libfabric's shm provider.
func TestPGAS(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		env  []string
	}{{"direct-4", 4, nil}, {"libfabric-3", 3, []string{"WEFT_ONESIDED_SHM=off"}}} {
		t.Run(c.name, func(t *testing.T) {
			if !launchtest.IsWorker() {
				launchtest.Run(t, c.n, "shm", 60*time.Second, c.env...)
				return
			}
			if err := run(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSingleton runs the program as a job of one rank (no launcher): it
// clears any launcher's variables first, so it runs so wherever it starts.
func TestSingleton(t *testing.T) {
	launchtest.AsSingleton(t)
	t.Setenv("WEFT_PROVIDER", "shm")
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
