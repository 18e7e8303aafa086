package onesided

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// spinLimit is how many polls a waiter makes before it starts giving the
// processor away (WEFT_ONESIDED_SPIN, default 4096). Pure spinning gives the
// lowest latency when every rank has a core of its own; on oversubscribed
// nodes the yields let the rank being waited for run.
var spinLimit = envInt("WEFT_ONESIDED_SPIN", 4096)

// opTimeout bounds the waits of calls that take no context (FetchAndOp,
// CompareAndSwap, an operation stuck behind a full queue):
// WEFT_ONESIDED_TIMEOUT, a Go duration, default 2m. They then fail with
// ErrTimeout.
var opTimeout = envDuration("WEFT_ONESIDED_TIMEOUT", 2*time.Minute)

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

// waiter paces a polling loop: spin, then yield the OS thread
// (sched_yield, so other processes on this core run too), then sleep in
// short naps once the wait has lasted a millisecond.
type waiter struct {
	n     int
	since time.Time
	limit time.Duration // > 0: fail with ErrTimeout after this long
}

// pause is called after each unsuccessful poll; it returns ctx's error
// (checked every 64 polls) when the wait must stop.
func (w *waiter) pause(ctx context.Context) error {
	w.n++
	if w.n&63 == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if w.n < spinLimit {
		return nil
	}
	if w.n == spinLimit {
		w.since = time.Now()
	}
	if w.limit > 0 && w.n&63 == 0 && time.Since(w.since) > w.limit {
		return fmt.Errorf("%w after %v (WEFT_ONESIDED_TIMEOUT)", ErrTimeout, w.limit)
	}
	if w.n&15 == 0 && time.Since(w.since) > time.Millisecond {
		time.Sleep(20 * time.Microsecond)
		return nil
	}
	runtime.Gosched()
	syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	return nil
}
