package ddt_test

import (
	"runtime"
	"syscall"
	"testing"
)

// threadCPU returns the CPU time consumed by the calling OS thread.
func threadCPU() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0, false
	}
	return syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime), true
}

// cpuLoop runs f b.N times on a locked thread and reports the CPU time per
// op as "cpu-ns/op": on a shared, oversubscribed machine wall time includes
// time spent waiting for a core, CPU time does not.
func cpuLoop(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, ok := threadCPU()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	if c1, ok2 := threadCPU(); ok && ok2 && n > 0 {
		b.ReportMetric(float64(c1-c0)/float64(n), "cpu-ns/op")
	}
}
