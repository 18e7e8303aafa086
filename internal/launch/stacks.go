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

// StacksEnv is set to 1 in every rank's environment, local, ssh or Slurm
// (unless the launcher's own environment or Config.Env sets it): a weft
// rank's bootstrap then writes its goroutine stacks to stderr on SIGUSR1 and
// carries on (internal/bootstrap). Job.DumpStacks sends that SIGUSR1.
const StacksEnv = "WEFT_SIGUSR1_STACKS"

// stacksEnvEntry is the StacksEnv entry that goes first in the ranks'
// environment: the launcher's own value when it has one, else 1.
func stacksEnvEntry() string {
	if v, ok := os.LookupEnv(StacksEnv); ok {
		return StacksEnv + "=" + v
	}
	return StacksEnv + "=1"
}

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

// askStacks asks the ranks for their goroutine stacks with sig (SIGQUIT:
// write them and exit; SIGUSR1: write them and carry on), after switching
// the ranks' output to tagged lines so that the dumps of different ranks can
// be told apart. It returns the processes to watch for the end of the
// dumps (nil when no rank was asked):
//
//   - local ranks: every live process of their process groups and sessions
//     that catches sig gets it;
//   - ssh ranks: the remote wrapper gets "quit" or "usr1" on the lifeline
//     and signals the rank program if it catches sig; the ssh clients are
//     returned;
//   - Slurm: srun gets SIGUSR1, which it forwards to every task (SIGQUIT it
//     does not forward: it aborts the step); the srun process is returned.
func (j *Job) askStacks(sig syscall.Signal) []int {
	switch j.launcher {
	case "ssh":
		return j.askRemoteStacks(sig)
	case "slurm":
		return j.askSrunStacks()
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

// askRemoteStacks writes the stack request for sig on the lifeline of every
// ssh rank still running and returns those ranks' ssh clients. Whether the
// remote program catches sig is decided by the remote wrapper.
func (j *Job) askRemoteStacks(sig syscall.Signal) []int {
	line := lifelineUSR1
	if sig == syscall.SIGQUIT {
		line = lifelineQuit
	}
	j.out.forceTag()
	var asked []int
	for i, w := range j.lifelines {
		p := j.procs[i] // both in rank order
		if isZombie(p.cmd.Process.Pid) {
			continue
		}
		// A few bytes on a pipe the ssh client reads: this does not block.
		// A closed lifeline (the job is ending) fails with os.ErrClosed.
		if _, err := w.Write([]byte(line)); err != nil {
			log.Debug("stack request", "rank", p.id, "err", err)
			continue
		}
		asked = append(asked, p.cmd.Process.Pid)
	}
	log.Debug("stacks asked", "launcher", "ssh", "sig", sig, "ssh-pids", asked)
	return asked
}

// askSrunStacks sends SIGUSR1 to srun, which forwards it to every task of
// the step, and returns srun's pid.
func (j *Job) askSrunStacks() []int {
	if len(j.procs) == 0 {
		return nil
	}
	pid := j.procs[0].cmd.Process.Pid
	j.out.forceTag()
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		log.Debug("stack request", "srun", pid, "err", err)
		return nil
	}
	log.Debug("stacks asked", "launcher", "slurm", "srun", pid)
	return []int{pid}
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

// DumpStacks asks every rank for its goroutine stacks without ending the
// job: a weft rank started with StacksEnv=1 then writes its stacks to
// stderr and carries on. From then on the ranks' output is tagged line by
// line, as with TagOutput. Local ranks: SIGUSR1 goes to each process of the
// ranks that catches it (a Go program that did not ask for SIGUSR1 ignores
// it; a program that does not catch it is left alone). ssh ranks: the
// remote wrapper sends the rank program SIGUSR1 if it catches it. Slurm:
// srun forwards SIGUSR1 to every task, whether it catches it or not (a
// program that does not dies from it). It returns how many processes were
// asked: local rank processes, ssh clients or srun.
func (j *Job) DumpStacks() int {
	return len(j.askStacks(syscall.SIGUSR1))
}
