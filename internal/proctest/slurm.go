package proctest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

// Slurm is a private Slurm that deploy/slurm/single-node.sh started for
// one test: its own munged, slurmctld and one slurmd per node, on free
// ports of this host.
type Slurm struct {
	Dir  string // state, logs and slurm.conf
	Conf string // path of slurm.conf
}

// Env returns the SLURM_CONF environment entry that points clients (srun,
// sbatch, salloc) at this Slurm.
func (s *Slurm) Env() string { return "SLURM_CONF=" + s.Conf }

// StartSlurm brings up a private Slurm of nodes nodes with cpus CPUs each
// (several slurmd on this host when nodes > 1) and stops it when the test
// ends, checking that no step daemon of it is left. It skips (feature
// "slurm", or "root") when Slurm is not installed or the test is not root.
func StartSlurm(tb testing.TB, cpus, nodes int) *Slurm {
	tb.Helper()
	for _, b := range []string{"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged"} {
		if _, err := os.Stat(b); err != nil {
			testenv.Skip(tb, "slurm", "%s not installed (Debian packages slurmctld, slurmd, munge): %v", b, err)
		}
	}
	for _, b := range []string{"srun", "salloc", "sbatch", "sinfo"} {
		if _, err := exec.LookPath(b); err != nil {
			testenv.Skip(tb, "slurm", "%s not installed (Debian package slurm-client): %v", b, err)
		}
	}
	if os.Geteuid() != 0 {
		testenv.Skip(tb, "root", "the private Slurm runs slurmd as root; not running as root")
	}
	// The munge user must reach the socket directory: t.TempDir's parent is
	// private, so make a world-traversable directory.
	dir, err := os.MkdirTemp("", "weft-slurm-")
	if err != nil {
		tb.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	s := &Slurm{Dir: dir, Conf: filepath.Join(dir, "slurm.conf")}
	script := filepath.Join(RepoRoot(tb), "deploy", "slurm", "single-node.sh")
	tb.Cleanup(func() {
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			tb.Errorf("stopping Slurm: %v\n%s", err, out)
		}
		if left := StepDaemons(s.Conf); len(left) > 0 {
			tb.Errorf("step daemons of the private Slurm still running after stop: %v", left)
		}
		if tb.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "log", "*.log"))
			for _, f := range logs {
				b, _ := os.ReadFile(f)
				tb.Logf("%s:\n%s", filepath.Base(f), b)
			}
		}
		os.RemoveAll(dir)
	})
	ctld, slurmd := freePort(tb, 1), freePort(tb, nodes)
	r := Run(tb, 60*time.Second, nil, "", script, "start", dir,
		strconv.Itoa(ctld), strconv.Itoa(slurmd), strconv.Itoa(cpus), strconv.Itoa(nodes))
	if r.Code != 0 {
		tb.Fatalf("private Slurm did not start (exit %d):\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	return s
}

// freePort returns the first of n consecutive TCP ports of 127.0.0.1 that
// were free a moment ago.
func freePort(tb testing.TB, n int) int {
	tb.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		ls := []net.Listener{l}
		for p := base + 1; p < base+n; p++ {
			if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
				ls = append(ls, l)
			}
		}
		for _, l := range ls {
			l.Close()
		}
		if len(ls) == n {
			return base
		}
	}
	tb.Fatalf("no %d consecutive free ports", n)
	return 0
}

// StepDaemons lists the slurmstepd processes that carry SLURM_CONF=conf.
func StepDaemons(conf string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.TrimSpace(string(comm)) != "slurmstepd" {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == "SLURM_CONF="+conf {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// RepoRoot returns the module root: the first directory above the test's
// working directory that holds go.mod.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// WaitJob polls job id until it has ended, at most d (then it cancels the
// job and fails the test), and returns its final state (COMPLETED, FAILED,
// TIMEOUT, ...) and exit code as scontrol shows them ("0:0": exit status and
// signal).
func (s *Slurm) WaitJob(tb testing.TB, id string, d time.Duration) (state, exitCode string) {
	tb.Helper()
	env := append(os.Environ(), s.Env())
	deadline := time.Now().Add(d)
	for {
		cmd := exec.Command("scontrol", "show", "job", "-o", id)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			tb.Fatalf("scontrol show job %s: %v", id, err)
		}
		fields := map[string]string{}
		for _, f := range strings.Fields(string(out)) {
			if k, v, ok := strings.Cut(f, "="); ok {
				fields[k] = v
			}
		}
		switch fields["JobState"] {
		case "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT":
		default:
			return fields["JobState"], fields["ExitCode"]
		}
		if time.Now().After(deadline) {
			c := exec.Command("scancel", id)
			c.Env = env
			c.Run()
			tb.Fatalf("job %s still %s after %v; cancelled", id, fields["JobState"], d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
