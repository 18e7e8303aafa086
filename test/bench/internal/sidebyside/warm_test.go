package sidebyside

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestWarmCoreSpins: WarmCore lasts WarmTime and spends it on the CPU,
// not asleep (a sleeping rank would leave its vCPU idle, which is what
// it exists to avoid).
func TestWarmCoreSpins(t *testing.T) {
	runtime.LockOSThread() // the thread's CPU time is the goroutine's
	defer runtime.UnlockOSThread()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, t0 := cpu(), time.Now()
	WarmCore()
	wall, used := time.Since(t0), cpu()-c0
	if wall < WarmTime {
		t.Fatalf("WarmCore returned after %v, want at least %v", wall, WarmTime)
	}
	// The thread may be descheduled on a busy machine; a sleep would use
	// next to nothing.
	if used < WarmTime/10 {
		t.Fatalf("WarmCore used %v of CPU in %v, want at least %v", used, wall, WarmTime/10)
	}
}
