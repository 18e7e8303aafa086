package testcluster

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/weft-hpc/weft/internal/testenv"
)

// Feature is the internal/testenv feature name of the test cluster:
// WEFT_REQUIRE=cluster makes a test that cannot have one fail instead of
// skipping.
const Feature = "cluster"

var shared struct {
	once sync.Once
	cfg  Config
	c    *Cluster
	err  error
}

// Shared returns the test binary's cluster, starting it with cfg on the
// first call (later calls get the same cluster whatever their cfg). When
// this machine cannot run a cluster (not root, a tool or package missing)
// it skips t through testenv with the reason; when the cluster fails to
// start although it could, it fails t. Call StopShared from TestMain.
func Shared(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if why := Missing(cfg); why != "" {
		testenv.Skip(t, Feature, "a multi-node test cluster %s", why)
	}
	shared.once.Do(func() {
		shared.cfg = cfg
		shared.c, shared.err = Start(context.Background(), cfg)
	})
	if shared.err != nil {
		t.Fatalf("test cluster: %v", shared.err)
	}
	if (cfg.Slurm && !shared.cfg.Slurm) || (cfg.SSHD && !shared.cfg.SSHD) || cfg.Nodes > shared.c.Nodes() {
		t.Fatalf("test cluster started with %+v cannot serve %+v: start the shared cluster with everything the binary needs", shared.cfg, cfg)
	}
	return shared.c
}

// StopShared stops the cluster Shared started, if any.
func StopShared() error {
	if shared.c == nil {
		return nil
	}
	return shared.c.Stop()
}

// Main runs the tests and then stops the shared cluster; a failure to
// tear it down completely fails the run. Use it as TestMain's body:
//
//	func TestMain(m *testing.M) { testcluster.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "test cluster teardown: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
