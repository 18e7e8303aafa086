package sidebyside

import "time"

// WarmTime is how long a rank keeps its core busy before its first timed
// call (WarmCore). mpibench.h's mpibench_start spins as long after
// MPI_Init, so that every contender starts on a warm core.
const WarmTime = 100 * time.Millisecond

// WarmCore keeps the calling goroutine's core busy for WarmTime. A rank
// calls it after joining the job and before its first timed loop: on the
// virtual machines these tools run on, a vCPU that idled in the kernel
// (weft's bootstrap waits there, where MPI's initialisation spins) runs
// its first milliseconds of calls up to twice as slowly, which OSU's
// warm-up of a tenth of the iterations does not cover
// (docs/perf/collectives.md, "Warm cores").
func WarmCore() {
	t0 := time.Now()
	for time.Since(t0) < WarmTime {
	}
}
