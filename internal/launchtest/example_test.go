package launchtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/bootstrap"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// A multi-process test: the parent starts 4 ranks of this same test, and
// each rank runs the body after the guard.
func ExampleRun() {
	_ = func(t *testing.T) { // func TestRing(t *testing.T)
		if !launchtest.IsWorker() {
			launchtest.Run(t, 4, "shm", 30*time.Second)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		bs, err := bootstrap.Init(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer bs.Finalize()
		// ... rank bs.Rank() of bs.Size() does its part ...
	}
}
