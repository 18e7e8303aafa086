package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestNodeCPUs: the command-line form of NodeCPUs, and CPU sets that
// Start refuses.
func TestNodeCPUs(t *testing.T) {
	for in, want := range map[string][][]int{"": nil, "0:1": {{0}, {1}}, "0-2:3,5": {{0, 1, 2}, {3, 5}}, ":1": {nil, {1}}} {
		got, err := ParseNodeCPUs(in)
		if err != nil || !slices.EqualFunc(got, want, slices.Equal[[]int]) {
			t.Errorf("ParseNodeCPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "2-1", "-1", "0:1-"} {
		if got, err := ParseNodeCPUs(in); err == nil {
			t.Errorf("ParseNodeCPUs(%q) = %v, want an error", in, got)
		}
	}
	for _, cfg := range []Config{
		{Nodes: 2, NodeCPUs: [][]int{{0}, {0}, {0}}},
		{Nodes: 2, NodeCPUs: [][]int{{1 << 16}}},
	} {
		if err := checkNodeCPUs(cfg); err == nil {
			t.Errorf("checkNodeCPUs(%v) accepted", cfg.NodeCPUs)
		}
	}
	var own unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		t.Fatal(err)
	}
	for cpu := range len(own) * 64 {
		if own.IsSet(cpu) {
			if err := checkNodeCPUs(Config{Nodes: 2, NodeCPUs: [][]int{nil, {cpu}}}); err != nil {
				t.Errorf("CPU %d refused: %v", cpu, err)
			}
		}
	}
}

// TestSplitCPUs: the default CPU shares of the nodes.
func TestSplitCPUs(t *testing.T) {
	for _, c := range []struct {
		nodes int
		cpus  []int
		want  [][]int
	}{
		{2, []int{0, 1}, [][]int{{0}, {1}}},
		{2, []int{0, 1, 2, 3, 4}, [][]int{{0, 1, 2}, {3, 4}}},
		{3, []int{4, 6}, [][]int{{4}, {6}, {4}}},
		{1, []int{0, 1}, [][]int{{0, 1}}},
		{2, nil, nil},
	} {
		if got := splitCPUs(c.nodes, c.cpus); !slices.EqualFunc(got, c.want, slices.Equal[[]int]) {
			t.Errorf("splitCPUs(%d, %v) = %v, want %v", c.nodes, c.cpus, got, c.want)
		}
	}
	sets, err := SplitCPUs(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkNodeCPUs(Config{Nodes: 2, NodeCPUs: sets}); err != nil || len(sets) != 2 {
		t.Errorf("SplitCPUs(2) = %v: %v", sets, err)
	}
}

// TestUpDown starts a two-node cluster with Slurm and sshd, checks what
// makes the nodes nodes (own host names, hosts files, /dev/shm; reaching
// each other by name over the bridge, ssh and a two-node srun --mpi=pmi2),
// kills a node, stops the cluster and checks that nothing of it is left.
// Node 1 runs on the first CPU this process may use and node 2 on the
// last (NodeCPUs): every way of starting a process in a node keeps it
// there.
func TestUpDown(t *testing.T) {
	var own unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for cpu := range len(own) * 64 {
		if own.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	first, last := cpus[0], cpus[len(cpus)-1]
	cfg := Config{Nodes: 2, Slurm: true, SSHD: true, NodeCPUs: [][]int{{first}, {last}}}
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
	const allowed = `$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)`
	if s := out(1, "ssh", "-F", c.Dir()+"/ssh/config", "n2", "echo $(hostname) "+allowed); s != fmt.Sprintf("n2 %d", last) {
		t.Errorf("ssh n2 from node 1: %q, want host n2 on CPU %d", s, last)
	}
	for k, cpu := range []int{first, last} {
		if s := out(k+1, "sh", "-c", "echo "+allowed); s != strconv.Itoa(cpu) {
			t.Errorf("node %d runs a command on CPUs %q, want %d", k+1, s, cpu)
		}
	}
	s := out(1, "srun", "-N", "2", "-n", "4", "--mpi=pmi2", "sh", "-c", `echo "$SLURM_NODEID $(hostname) $PMI_SIZE `+allowed+`"`)
	if strings.Count(s, fmt.Sprintf("n1 4 %d", first)) != 2 || strings.Count(s, fmt.Sprintf("n2 4 %d", last)) != 2 {
		t.Errorf("srun -N 2 -n 4 (node 1 on CPU %d, node 2 on CPU %d): %q", first, last, s)
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
