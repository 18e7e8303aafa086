package main

import (
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/launchtest"
)

// TestHistogram runs the program as 4 ranks on weft's node transport and
// as 3 ranks through libfabric's tcp provider.
func TestHistogram(t *testing.T) {
	for _, c := range []struct {
		name, prov string
		n          int
		env        []string
	}{{"native-4", "shm", 4, nil}, {"tcp-3", "tcp;ofi_rxm", 3, []string{"WEFT_NODE_TRANSPORT=fabric"}}} {
		t.Run(c.name, func(t *testing.T) {
			if !launchtest.IsWorker() {
				launchtest.Run(t, c.n, c.prov, 60*time.Second, c.env...)
				return
			}
			if err := run(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSingleton runs the program as a job of one rank (no launcher).
func TestSingleton(t *testing.T) {
	launchtest.AsSingleton(t)
	t.Setenv("WEFT_PROVIDER", "shm")
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
