package bootstrap

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// stacksEnv, set to a true value by the launcher (fabrun sets it to 1 for
// its local ranks), makes Init install a SIGUSR1 handler that writes every
// goroutine's stack to stderr and lets the program carry on: a hung job
// can be inspected without ending it (fabrun forwards its own SIGUSR1).
// It is opt-in because a library must not take a signal the program may
// want; signal.Notify adds a receiver and leaves the program's own
// receivers, of SIGUSR1 or any other signal, untouched.
const stacksEnv = "WEFT_SIGUSR1_STACKS"

// maxStacks bounds one dump (goroutines beyond it are cut off).
const maxStacks = 64 << 20

var stacksOnce sync.Once

// setupStacks installs the SIGUSR1 stack dump once per process when
// getenv asks for it. rank labels the dump ("?" before it is known).
func setupStacks(getenv func(string) string) {
	v := getenv(stacksEnv)
	if v == "" {
		return
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		log.Warn("ignoring "+stacksEnv+": not a boolean", "value", v)
		return
	}
	if !on {
		return
	}
	rank := getenv("PMI_RANK")
	if rank == "" {
		rank = "?"
	}
	stacksOnce.Do(func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGUSR1)
		go func() {
			for range c {
				writeStacks(os.Stderr, rank)
			}
		}()
	})
}

// writeStacks writes a header naming rank and this process, then every
// goroutine's stack (the format of an unrecovered panic's traceback).
func writeStacks(w io.Writer, rank string) {
	buf := make([]byte, 256<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= maxStacks {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	hdr := fmt.Sprintf("weft: goroutine stacks of rank %s (pid %d) on SIGUSR1\n", rank, os.Getpid())
	_, _ = w.Write(append(append([]byte(hdr), buf...), '\n'))
}
