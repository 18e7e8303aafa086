package testcluster

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

// TestUpDown starts a two-node cluster with Slurm and sshd, checks what
// makes the nodes nodes (own host names, hosts files, /dev/shm; reaching
// each other by name over the bridge, ssh and a two-node srun --mpi=pmi2),
// kills a node, stops the cluster and checks that nothing of it is left.
func TestUpDown(t *testing.T) {
	cfg := Config{Nodes: 2, Slurm: true, SSHD: true}
	if why := Missing(cfg); why != "" {
		testenv.Skip(t, Feature, "a multi-node test cluster %s", why)
	}
	start := time.Now()
	c, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("up in %v", time.Since(start))
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := func(k int, name string, args ...string) string {
		t.Helper()
		b, err := c.Command(ctx, k, name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("node %d: %s %v: %v\n%s", k, name, args, err, b)
		}
		return strings.TrimSpace(string(b))
	}
	myhost, _ := os.Hostname()
	for k := 1; k <= 2; k++ {
		if h := out(k, "hostname"); h != c.Host(k) {
			t.Errorf("node %d host name %q, want %q", k, h, c.Host(k))
		}
		if h := out(k, "getent", "hosts", "n2"); !strings.HasPrefix(h, c.Addr(2)+" ") {
			t.Errorf("node %d resolves n2 to %q", k, h)
		}
		if s := out(k, "ip", "-4", "-o", "addr", "show", "eth0"); !strings.Contains(s, c.Addr(k)+"/24") {
			t.Errorf("node %d eth0: %q", k, s)
		}
		if s := out(k, "ip", "route"); strings.Contains(s, "default") {
			t.Errorf("node %d has a default route: %q", k, s)
		}
	}
	if h, _ := os.Hostname(); h != myhost {
		t.Errorf("the machine's host name changed to %q", h)
	}
	// /dev/shm is private per node and shared by the node's processes.
	out(1, "sh", "-c", "echo x > /dev/shm/"+c.Name())
	if _, err := os.Stat("/dev/shm/" + c.Name()); err == nil {
		t.Errorf("a file in node 1's /dev/shm shows in the machine's")
	}
	if s := out(2, "sh", "-c", "ls /dev/shm"); strings.Contains(s, c.Name()) {
		t.Errorf("node 1's /dev/shm file shows on node 2")
	}
	if s := out(1, "cat", "/dev/shm/"+c.Name()); s != "x" {
		t.Errorf("node 1's /dev/shm not shared between its processes: %q", s)
	}
	if s := out(1, "ssh", "-F", c.Dir()+"/ssh/config", "n2", "hostname"); s != "n2" {
		t.Errorf("ssh n2 hostname from node 1: %q", s)
	}
	if s := out(1, "srun", "-N", "2", "-n", "4", "--mpi=pmi2", "sh", "-c", `echo "$SLURM_NODEID $(hostname) $PMI_SIZE"`); strings.Count(s, "n1 4") != 2 || strings.Count(s, "n2 4") != 2 {
		t.Errorf("srun -N 2 -n 4: %q", s)
	}

	// A killed node's processes are all gone at once (test/cluster's
	// TestNodeKilled brings a node back with RestartNode).
	if len(c.Procs(2)) == 0 {
		t.Errorf("node 2 runs no process (slurmd, sshd)")
	}
	n, err := c.KillNode(2)
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(c.Dir() + "/slurm/slurmctld.log")
			t.Logf("slurmctld.log:\n%s", b)
		}
	}()
	if err != nil || n < 2 {
		t.Errorf("KillNode(2) = %d, %v", n, err)
	}
	if p := c.Procs(2); len(p) > 0 {
		t.Errorf("node 2 still runs %v", p)
	}
	start = time.Now()
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("down in %v", time.Since(start))
	if left := Leftovers(c.Name()); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
	if b, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(b), c.Name()) {
		t.Errorf("ip netns list still shows the cluster:\n%s", b)
	}
	if b, _ := exec.Command("pgrep", "-a", "-f", c.Name()).Output(); len(b) > 0 {
		t.Errorf("processes naming the cluster still run:\n%s", b)
	}
}
