package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testcluster"
	"github.com/weft-hpc/weft/internal/testenv"
)

var bins = proctest.NewBuilder("github.com/weft-hpc/weft/cmd/fabrun", "github.com/weft-hpc/weft/examples/hello",
	"github.com/weft-hpc/weft/test/cluster/hybrid", "github.com/weft-hpc/weft/test/cluster/hybridbench")

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testcluster.StopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "test cluster teardown: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	bins.Close()
	os.Exit(code)
}

// cluster returns the binary's two-node cluster (Slurm and sshd on both).
func cluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	stallsBefore()
	return testcluster.Shared(t, testcluster.Config{Nodes: 2, Slurm: true, SSHD: true})
}

type result = proctest.Result

// inNode runs name inside node k with extra environment, killing it after
// timeout (which fails the test).
func inNode(t *testing.T, c *testcluster.Cluster, k int, timeout time.Duration, env []string, name string, args ...string) result {
	t.Helper()
	cmd := c.Command(context.Background(), k, name, args...)
	cmd.Env = append(cmd.Env, env...)
	return proctest.RunCmd(t, timeout, cmd)
}

var hybridLine = regexp.MustCompile(`rank (\d) of 4 on (n\d): hybrid ok \(node \[(\d*)\] net \[(\d) (\d)\] provider tcp;ofi_rxm\)`)

// checkHybrid checks that the 4 ranks of a hybrid job, two per node,
// passed every check, each with one same-node peer on the node transport
// and two other-node peers on tcp;ofi_rxm.
func checkHybrid(t *testing.T, what string, r result) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("%s: exit %d\n%s%s%s", what, r.Code, r.Stdout, r.Stderr, stalls())
	}
	ms := hybridLine.FindAllStringSubmatch(r.Stdout, -1)
	hosts := map[string]int{}
	seen := map[string]bool{}
	for _, m := range ms {
		seen[m[1]] = true
		hosts[m[2]]++
		if m[3] == "" || m[3] == m[1] {
			t.Errorf("%s: rank %s has same-node peer %q", what, m[1], m[3])
		}
	}
	if len(seen) != 4 || hosts["n1"] != 2 || hosts["n2"] != 2 {
		t.Fatalf("%s: want 4 ranks, 2 on each of n1 and n2, each hybrid ok over tcp;ofi_rxm:\n%s%s", what, r.Stdout, r.Stderr)
	}
	t.Logf("%s: %v", what, r.Took)
}

// stallsBefore is how many kernel stall reports there were when the
// binary first asked for its cluster.
var stallsBefore = sync.OnceValue(func() int { return len(testcluster.KernelStalls()) })

// stalls is the kernel's stall reports since then
// (testcluster.KernelStalls), for a failure message, or "".
func stalls() string {
	s := testcluster.KernelStalls()
	if len(s) <= stallsBefore() {
		return ""
	}
	return "\nthe kernel reported stalls meanwhile (the machine itself stalled):\n" + strings.Join(s[stallsBefore():], "\n") + "\n"
}

// checkRing checks that hello's 4 ranks, tagged, ran two on each node.
func checkRing(t *testing.T, what string, r result, out string) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("%s: exit %d\n%s%s%s%s", what, r.Code, out, r.Stdout, r.Stderr, stalls())
	}
	for _, want := range []string{"[0] rank 0 of 4 on n1: ring ok", "[1] rank 1 of 4 on n1: ring ok", "[2] rank 2 of 4 on n2: ring ok", "[3] rank 3 of 4 on n2: ring ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: no %q in\n%s%s", what, want, out, r.Stderr)
		}
	}
	t.Logf("%s: %v", what, r.Took)
}

// leftovers fails t when a process of the job (carrying mark) still runs
// on any node, or a node's /dev/shm holds anything.
func leftovers(t *testing.T, c *testcluster.Cluster, mark string) {
	t.Helper()
	if left := proctest.WaitGone(mark, 5*time.Second); len(left) > 0 {
		t.Errorf("job processes left behind: %v", left)
	}
	for k := 1; k <= c.Nodes(); k++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := c.Command(ctx, k, "sh", "-c", "ls -A /dev/shm").CombinedOutput()
		cancel()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("node %d /dev/shm after the job: %v %s", k, err, out)
		}
	}
}

const wantTCP = "WEFT_HYBRID_WANT_PROVIDER=tcp;ofi_rxm"

// TestFabrunSSH: fabrun on node 1 starts 4 ranks over ssh, two on each
// node, with no provider named: across nodes weft passes over verbs and
// efa (absent here) and lands on tcp;ofi_rxm; same-node peers use the
// node transport.
func TestFabrunSSH(t *testing.T) {
	c := cluster(t)
	fab, _ := bins.Path(t, "fabrun"), ""
	hyb := bins.Path(t, "hybrid")
	mark := proctest.Marker()
	r := inNode(t, c, 1, 90*time.Second, []string{"WEFT_PROVIDER="}, fab, "--ssh", c.SSH(), "--hosts", "n1:2,n2:2", "-n", "4",
		"--timeout", "80s", "--env", wantTCP, "--env", mark, "--env", "WEFT_LOG_LEVEL=debug", hyb)
	checkHybrid(t, "fabrun --hosts n1:2,n2:2 hybrid", r)
	for _, want := range []string{"tried=\"verbs;ofi_rxm, efa, tcp;ofi_rxm, sockets\"", "passed over"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("debug log lacks %q:\n%s", want, r.Stderr)
		}
	}
	leftovers(t, c, mark)
}

var benchLine = regexp.MustCompile(`(?m)^(bench smoke (idle|busy) (\d+) [0-9.]+ [0-9.]+|stream smoke (\d+) [0-9.]+)$`)

// TestHybridBench: hybridbench's speed measurement (docs/cluster-testing.md)
// runs with tiny sizes on 2 ranks per node: the same-node ping-pong on the
// node transport, alone and beside a stream to the other node over
// tcp;ofi_rxm, each reported with a rate. (The program checks the
// transports itself.)
func TestHybridBench(t *testing.T) {
	c := cluster(t)
	fab, hb := bins.Path(t, "fabrun"), bins.Path(t, "hybridbench")
	mark := proctest.Marker()
	r := inNode(t, c, 1, 60*time.Second, []string{"WEFT_PROVIDER="}, fab, "--ssh", c.SSH(), "--hosts", "n1:2,n2:2", "-n", "4",
		"--timeout", "50s", "--env", "WEFT_PROVIDER=tcp;ofi_rxm", "--env", "WEFT_BENCH_SIZES=8,65536", "--env", "WEFT_BENCH_REPS=1",
		"--env", "WEFT_BENCH_ITERS=5", "--env", "WEFT_BENCH_LABEL=smoke", "--env", mark, hb)
	if r.Code != 0 {
		t.Fatalf("hybridbench: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	got := map[string]bool{}
	for _, m := range benchLine.FindAllStringSubmatch(r.Stdout, -1) {
		if m[2] != "" {
			got[m[2]+" "+m[3]] = true
		} else {
			got["stream "+m[4]] = true
		}
	}
	for _, want := range []string{"idle 8", "idle 65536", "busy 8", "busy 65536", "stream 8", "stream 65536"} {
		if !got[want] {
			t.Errorf("hybridbench printed no %q line:\n%s%s", want, r.Stdout, r.Stderr)
		}
	}
	t.Logf("hybridbench smoke: %v\n%s", r.Took, r.Stdout)
	leftovers(t, c, mark)
}

// TestSrun: hybrid directly under srun -N 2 -n 4 --mpi=pmi2 (weft's PMI-2
// client, Slurm's process mapping for the node-local ranks).
func TestSrun(t *testing.T) {
	c := cluster(t)
	hyb := bins.Path(t, "hybrid")
	mark := proctest.Marker()
	r := inNode(t, c, 1, 90*time.Second, []string{wantTCP, mark, "WEFT_PROVIDER="}, "srun", "-N", "2", "-n", "4", "--mpi=pmi2", hyb)
	checkHybrid(t, "srun -N 2 -n 4 --mpi=pmi2 hybrid", r)
	leftovers(t, c, mark)
}

// TestSallocFabrun: fabrun inside a two-node allocation launches through
// srun by itself; hello's ring crosses the nodes twice. (The launch path
// is what is new here: the hybrid checks run under srun, sbatch, ssh and
// Hydra.)
func TestSallocFabrun(t *testing.T) {
	c := cluster(t)
	fab, hello := bins.Path(t, "fabrun"), bins.Path(t, "hello")
	mark := proctest.Marker()
	r := inNode(t, c, 1, 90*time.Second, []string{mark, "WEFT_PROVIDER="}, "salloc", "-N", "2", "-n", "4", fab, "-n", "4", "--timeout", "80s", "--tag-output", hello)
	checkRing(t, "salloc -N 2 -n 4 fabrun -n 4 hello", r, r.Stdout)
	leftovers(t, c, mark)
}

// TestSbatch: a batch script on two nodes runs fabrun, which uses the
// allocation; sbatch --wait returns the job's status. hello's ring
// crosses the nodes twice.
func TestSbatch(t *testing.T) {
	c := cluster(t)
	fab, hello := bins.Path(t, "fabrun"), bins.Path(t, "hello")
	dir := filepath.Join(c.Dir(), "sbatch-"+strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "job.sh")
	body := fmt.Sprintf("#!/bin/sh\n#SBATCH -N 2\n#SBATCH -n 4\nexec %s -n 4 --timeout 80s --tag-output %s\n", fab, hello)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	mark := proctest.Marker()
	r := inNode(t, c, 1, 90*time.Second, []string{mark, "WEFT_PROVIDER="}, "sbatch", "--wait", "-o", out, "-D", dir, script)
	b, _ := os.ReadFile(out)
	checkRing(t, "sbatch -N 2 -n 4 (fabrun -n 4 hello)", r, string(b))
	leftovers(t, c, mark)
}

// TestHydra: MPICH's mpiexec.hydra starts the ranks over ssh on both
// nodes; weft's PMI-1 client talks to Hydra's proxies.
func TestHydra(t *testing.T) {
	c := cluster(t)
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testenv.Skip(t, "hydra", "mpiexec.hydra not installed (Debian package mpich): %v", err)
	}
	hyb := bins.Path(t, "hybrid")
	mark := proctest.Marker()
	r := inNode(t, c, 1, 90*time.Second, []string{"WEFT_PROVIDER="}, hydra, "-launcher", "ssh", "-launcher-exec", c.SSHWrapper(),
		"-hosts", "n1:2,n2:2", "-n", "4", "-genv", "WEFT_HYBRID_WANT_PROVIDER", "tcp;ofi_rxm", "-genv", strings.SplitN(mark, "=", 2)[0], strings.SplitN(mark, "=", 2)[1], hyb)
	checkHybrid(t, "mpiexec.hydra -hosts n1:2,n2:2 -n 4 hybrid", r)
	leftovers(t, c, mark)
}

// TestShmAcrossNodesFailsFast: naming shm for a job on two nodes fails
// at once with an error that says why, instead of hanging until the
// timeout: in hello (fabric.Select) and in endpoint.Init.
func TestShmAcrossNodesFailsFast(t *testing.T) {
	c := cluster(t)
	fab, hello := bins.Path(t, "fabrun"), bins.Path(t, "hello")
	for _, cs := range []struct{ prog, prov, want string }{
		{hello, "shm", "shm reaches only processes on one node"},
		{bins.Path(t, "hybrid"), "shm", "shm reaches only processes on one node"},
	} {
		mark := proctest.Marker()
		r := inNode(t, c, 1, 60*time.Second, nil, fab, "--ssh", c.SSH(), "--hosts", "n1,n2", "-n", "2", "--timeout", "50s",
			"--provider", cs.prov, "--env", mark, cs.prog)
		if r.Code == 0 || r.Code == 124 || !strings.Contains(r.Stderr, cs.want) {
			t.Errorf("%s --provider %s across nodes: exit %d, want a failure saying %q:\n%s%s", filepath.Base(cs.prog), cs.prov, r.Code, cs.want, r.Stdout, r.Stderr)
		}
		if r.Took > 20*time.Second {
			t.Errorf("%s --provider %s across nodes took %v to fail", filepath.Base(cs.prog), cs.prov, r.Took)
		}
		t.Logf("%s --provider %s: failed in %v", filepath.Base(cs.prog), cs.prov, r.Took)
		leftovers(t, c, mark)
	}
}

// TestNodeKilled: while the ranks wait on each other, every process of
// node 2 is killed (its sshd, its ranks: the node is gone). fabrun ends the
// job with an error within seconds and nothing of the job is left on node
// 1; node 2 is then brought back for the other tests.
func TestNodeKilled(t *testing.T) {
	c := cluster(t)
	fab, hyb := bins.Path(t, "fabrun"), bins.Path(t, "hybrid")
	mark := proctest.Marker()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := c.Command(ctx, 1, fab, "--ssh", c.SSH(), "--hosts", "n1:2,n2:2", "-n", "4", "--timeout", "80s",
		"--env", wantTCP, "--env", mark, "--env", "WEFT_HYBRID_HOLD=60s", hyb)
	var so, se proctest.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for strings.Count(so.String(), "holding") < 4 {
		select {
		case err := <-done:
			t.Fatalf("job ended before the node was killed: %v\n%s%s", err, so.String(), se.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Cleanup(func() {
		// Node 2 comes back for later tests: sshd and slurmd again. (Slurm
		// takes the node back at once: no job was on it when it died.)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := c.RestartNode(ctx, 2); err != nil {
			t.Errorf("restarting node 2: %v", err)
			return
		}
		if out, err := c.Command(ctx, 1, "ssh", "-F", c.Dir()+"/ssh/config", "n2", "hostname").CombinedOutput(); err != nil || string(bytes.TrimSpace(out)) != "n2" {
			t.Errorf("ssh n2 after restarting node 2: %v %s", err, out)
		}
	})
	killed := time.Now()
	n, err := c.KillNode(2)
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	select {
	case werr = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("job still running 30 s after node 2 died (%d processes killed):\n%s%s", n, so.String(), se.String())
	}
	took := time.Since(killed)
	t.Logf("killed %d processes of node 2; fabrun exited after %v: %v\n%s", n, took, werr, se.String())
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() == 0 || ee.ExitCode() == 124 {
		t.Errorf("fabrun after node 2 died: %v, want a failure other than the timeout", werr)
	}
	if !strings.Contains(se.String(), "fabrun: rank 2") && !strings.Contains(se.String(), "fabrun: rank 3") {
		t.Errorf("fabrun does not name a rank of node 2:\n%s", se.String())
	}
	if took > 10*time.Second {
		t.Errorf("job took %v to end after node 2 died", took)
	}
	if left := proctest.WaitGone(mark, 5*time.Second); len(left) > 0 {
		t.Errorf("job processes left behind: %v", left)
	}
	ls, err := c.Command(ctx, 1, "sh", "-c", "ls -A /dev/shm").CombinedOutput()
	if err != nil || len(bytes.TrimSpace(ls)) > 0 {
		t.Errorf("node 1 /dev/shm after the job: %v %s", err, ls)
	}
}
