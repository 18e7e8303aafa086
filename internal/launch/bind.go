package launch

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Binding of local ranks to CPUs (Config.Bind).
//
// Two busy-polling ranks that the kernel lets migrate sometimes land on
// one CPU for a few milliseconds, and each then polls through the other's
// time slice: a 2-rank barrier that takes 0.2 µs takes hundreds of µs
// while it lasts. MPI launchers bind for the same reason (Open MPI's
// mpirun binds each of up to two ranks to a core by default). The local
// launcher does the same when the ranks fit: each local rank gets its own
// share of the CPUs fabrun may use, inherited at fork from the thread
// that starts it.
const (
	BindAuto = "auto" // a disjoint, equal share of the CPUs per rank, when 2 or more ranks fit
	BindCore = "core" // one CPU per rank; an error when the ranks outnumber the CPUs
	BindNone = "none" // no binding
)

// checkBind validates a Config.Bind value ("" means BindAuto).
func checkBind(mode string) (string, error) {
	switch mode {
	case "", BindAuto:
		return BindAuto, nil
	case BindCore, BindNone:
		return mode, nil
	}
	return "", fmt.Errorf("%w: unknown binding %q (want auto, core or none)", ErrUsage, mode)
}

// bindSets returns the CPUs each of n local ranks is bound to under mode,
// given the CPUs this process may use (ascending); nil when the ranks are
// not bound.
func bindSets(mode string, n int, cpus []int) ([][]int, error) {
	c := len(cpus)
	switch {
	case mode == BindNone || n == 0:
		return nil, nil
	case mode == BindCore && n > c:
		return nil, fmt.Errorf("%w: cannot bind %d local ranks to one CPU each: this process may use %d CPUs", ErrUsage, n, c)
	case mode == BindAuto && (n < 2 || n > c):
		return nil, nil
	}
	sets := make([][]int, n)
	for i := range n {
		if mode == BindCore {
			sets[i] = cpus[i : i+1]
		} else {
			sets[i] = cpus[i*c/n : (i+1)*c/n]
		}
	}
	return sets, nil
}

// shareProcs returns the GOMAXPROCS entry for the environment of n local
// ranks that share c CPUs unbound under mode BindAuto (more ranks than
// CPUs): "GOMAXPROCS=1", each rank's share of the CPUs rounded up to one,
// as bound ranks get theirs from their CPU sets. It returns "" when the
// ranks are bound or alone, under BindCore and BindNone, and when env
// sets GOMAXPROCS already. A Go rank sizes GOMAXPROCS from the CPUs it
// may use, all of them when unbound: four ranks on two CPUs then kept
// eight threads busy, the runtime's idle Ps spinning for work in time the
// peers needed (docs/fabrun.md, "Binding").
func shareProcs(mode string, n, c int, env []string) string {
	if mode != BindAuto || n <= c || c == 0 {
		return ""
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return ""
		}
	}
	return "GOMAXPROCS=1"
}

// allowedCPUs returns the CPUs this process may run on, ascending.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("launch: CPUs of this process: %w", err)
	}
	var cpus []int
	for i := range len(set) * 64 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// startDetached starts cmd from a new goroutine, bound to cpus when there
// are any. Pdeathsig fires when the thread that forked the child exits,
// not the process: a goroutine that is not locked to its thread runs on
// one of the runtime's pooled threads, which never exit, whereas the
// caller's goroutine may hold a thread (runtime.LockOSThread) that ends
// with it. To bind, the goroutine locks its thread, narrows that thread's
// affinity (the child inherits it at fork), and restores it before
// unlocking, so the thread goes back to the pool as it was.
func startDetached(cmd *exec.Cmd, cpus []int) error {
	errc := make(chan error, 1)
	go func() {
		if len(cpus) == 0 {
			errc <- cmd.Start()
			return
		}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var old, set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			errc <- fmt.Errorf("bind to CPUs %v: %w", cpus, err)
			return
		}
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- fmt.Errorf("bind to CPUs %v: %w", cpus, err)
			return
		}
		err := cmd.Start()
		if rerr := unix.SchedSetaffinity(0, &old); rerr != nil {
			log.Warn("restoring a launcher thread's CPUs", "err", rerr)
		}
		errc <- err
	}()
	return <-errc
}

// cpuList formats cpus for the log, e.g. "0-3,6".
func cpuList(cpus []int) string {
	var b []byte
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d", cpus[i])
		if j > i {
			b = fmt.Appendf(b, "-%d", cpus[j])
		}
		i = j + 1
	}
	return string(b)
}
