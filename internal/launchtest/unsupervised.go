package launchtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/pmi"
	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// RunMayDie is Run for tests in which the ranks listed in mayDie leave the
// job early on purpose (exit without finalising, kill themselves): a test
// of what the surviving ranks see. A launcher ends the whole job when a
// rank dies (and may when one exits without finalising), so these ranks run
// unsupervised instead: launchtest serves PMI-1 itself, over a socketpair
// per rank, and starts each rank in a process group of its own. No rank's
// exit ends the others. RunMayDie fails t unless every rank not in mayDie
// runs and passes the test; the ranks in mayDie may end in any way. After
// the job, or at timeout, every rank's process group is killed.
func RunMayDie(t *testing.T, n int, provider string, timeout time.Duration, mayDie []int, env ...string) {
	t.Helper()
	if IsWorker() {
		t.Fatal("launchtest.RunMayDie called inside a worker; guard it with launchtest.IsWorker()")
	}
	testenv.Provider(t, provider)
	if dl, ok := t.Deadline(); ok {
		if left := time.Until(dl) - 2*time.Second; left < timeout {
			timeout = max(left, time.Second)
		}
	}
	out, err := runUnsupervised(t.Name(), n, provider, timeout, env)
	if err != nil {
		t.Fatalf("launchtest: %d ranks of %s: %v\n%s", n, t.Name(), err, out)
	}
	var survivors []int
	for r := range n {
		if !slices.Contains(mayDie, r) {
			survivors = append(survivors, r)
		}
	}
	skip, err := checkRanks(out, t.Name(), survivors)
	if err != nil {
		t.Fatalf("launchtest: %d ranks of %s: %v\n%s", n, t.Name(), err, out)
	}
	if skip != "" {
		t.Skipf("every surviving rank skipped: %s", skip)
	}
	t.Logf("%d ranks of %s ran (ranks %v may die); their output:\n%s", n, t.Name(), mayDie, out)
}

// workerEnv is this process's environment without any launcher's
// variables, plus the worker's own.
func workerEnv(rank, n int, provider string, extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "PMIX_") || strings.HasPrefix(k, "MPI_LOCAL") ||
			strings.HasPrefix(k, "SLURM_") || k == "WEFT_PMI" || k == "WEFT_PMI_SECRET" ||
			k == "WEFT_LOCAL_RANK" || k == "WEFT_LOCAL_SIZE" {
			continue
		}
		env = append(env, kv)
	}
	r, size := strconv.Itoa(rank), strconv.Itoa(n)
	env = append(env, "WEFT_TEST_WORKER=1", "PMI_FD=3", "PMI_RANK="+r, "PMI_SIZE="+size,
		"WEFT_LOCAL_RANK="+r, "WEFT_LOCAL_SIZE="+size)
	if provider != "" {
		env = append(env, "WEFT_PROVIDER="+provider)
	}
	return append(env, extra...)
}

// runUnsupervised runs name as n ranks under launchtest's own PMI server
// and waits until every rank has exited (or timeout), whatever their exit.
func runUnsupervised(name string, n int, provider string, timeout time.Duration, extra []string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("test binary: %w", err)
	}
	srv, err := pmi.NewServer(pmi.ServerConfig{Size: n})
	if err != nil {
		return "", err
	}
	defer srv.Close()
	var buf proctest.Buffer
	var (
		cmds   []*exec.Cmd
		copies sync.WaitGroup
	)
	killAll := func() {
		for _, c := range cmds {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
	defer func() {
		killAll()
		copies.Wait()
		for _, c := range cmds {
			removeShm(c.Process.Pid)
		}
	}()
	for r := range n {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return buf.String(), fmt.Errorf("PMI socketpair: %w", err)
		}
		mine, theirs := os.NewFile(uintptr(fds[0]), "pmi"), os.NewFile(uintptr(fds[1]), "pmi-rank")
		conn, err := net.FileConn(mine)
		mine.Close()
		if err != nil {
			theirs.Close()
			return buf.String(), fmt.Errorf("PMI connection: %w", err)
		}
		cmd := exec.Command(exe, "-test.run", Pattern(name), "-test.count=1", "-test.v=true",
			"-test.timeout="+(timeout+2*time.Second).String())
		cmd.Env = workerEnv(r, n, provider, extra)
		cmd.ExtraFiles = []*os.File{theirs} // fd 3
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		pr, pw := io.Pipe()
		cmd.Stdout, cmd.Stderr = pw, pw
		err = cmd.Start()
		theirs.Close()
		if err != nil {
			conn.Close()
			pw.Close()
			return buf.String(), fmt.Errorf("start rank %d: %w", r, err)
		}
		cmds = append(cmds, cmd)
		go srv.ServeConn(conn, r)
		copies.Add(1)
		go func() {
			defer copies.Done()
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				fmt.Fprintf(&buf, "[%d] %s\n", r, sc.Text())
			}
			_, _ = io.Copy(io.Discard, pr)
		}()
		go func() {
			_ = cmd.Wait()
			pw.Close()
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		copies.Wait() // every rank's output closed: the ranks have exited
		close(done)
	}()
	select {
	case <-done:
		return buf.String(), nil
	case <-ctx.Done():
		killAll()
		<-done
		return buf.String(), fmt.Errorf("job timed out after %v", timeout)
	}
}

// removeShm removes what libfabric's shm provider left in /dev/shm for a
// rank that died without closing its endpoints (regions named
// "<pid>:<n>:<m>").
func removeShm(pid int) {
	names, _ := filepath.Glob("/dev/shm/" + strconv.Itoa(pid) + ":*")
	for _, p := range names {
		_ = os.Remove(p)
	}
}
