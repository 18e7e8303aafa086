package launch

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// StacksEnv is set to 1 in every local rank's environment (unless the
// launcher's own environment or Config.Env sets it): a weft rank's bootstrap
// then writes its goroutine stacks to stderr on SIGUSR1 and carries on
// (internal/bootstrap). Job.DumpStacks sends that SIGUSR1.
const StacksEnv = "WEFT_SIGUSR1_STACKS"

// catches reports whether process pid has a handler installed for sig, as
// /proc/PID/status's SigCgt mask tells. Every Go program catches SIGQUIT
// (and dumps its goroutines on it) and SIGUSR1 (ignored unless the program
// asked for it); a C program or a shell usually catches neither, and would
// die (SIGQUIT with a core dump) if sent one.
func catches(pid int, sig syscall.Signal) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("SigCgt:")); ok {
			mask, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
			return err == nil && sig >= 1 && sig <= 64 && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// askStacks sends sig to every live process of the local ranks (their
// process groups and sessions) that catches it, after switching the ranks'
// output to tagged lines so that the dumps of different ranks can be told
// apart. It returns the processes signalled. ssh and srun clients are
// never signalled: a stack request would not reach their ranks.
func (j *Job) askStacks(sig syscall.Signal) []int {
	if j.launcher != "local" {
		return nil
	}
	ids := map[int]bool{}
	for _, p := range j.procs {
		ids[p.pgid] = true
	}
	var catchers, asked []int
	for _, pid := range jobProcs(ids) {
		if catches(pid, sig) {
			catchers = append(catchers, pid)
		}
	}
	if len(catchers) == 0 {
		return nil
	}
	j.out.forceTag()
	for _, pid := range catchers {
		if err := syscall.Kill(pid, sig); err != nil {
			if !errors.Is(err, syscall.ESRCH) {
				log.Debug("stack request", "pid", pid, "sig", sig, "err", err)
			}
			continue
		}
		asked = append(asked, pid)
	}
	log.Debug("stacks asked", "sig", sig, "pids", asked)
	return asked
}

// allGone reports whether every process of pids has exited.
func allGone(pids []int) bool {
	for _, pid := range pids {
		if !isZombie(pid) {
			return false
		}
	}
	return true
}

// stackWait bounds how long a timed-out job waits for its ranks to write
// their stacks and exit before they get SIGTERM: a second, or the kill
// grace when that is longer.
func stackWait(killGrace time.Duration) time.Duration {
	return max(time.Second, killGrace)
}

// DumpStacks asks every local rank for its goroutine stacks without ending
// the job: SIGUSR1 goes to each process of the ranks that catches it (a
// weft rank started with StacksEnv=1 then writes its stacks to stderr and
// carries on; a Go program that did not ask for SIGUSR1 ignores it; a
// program that does not catch it is left alone). From then on the ranks'
// output is tagged line by line, as with TagOutput. It returns how many
// processes were signalled: 0 for ssh and Slurm jobs, which it does not
// reach.
func (j *Job) DumpStacks() int {
	return len(j.askStacks(syscall.SIGUSR1))
}
