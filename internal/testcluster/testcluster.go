// Package testcluster runs a small cluster of "nodes" on this machine for
// tests that need more than one node: each node is a network namespace with
// its own host name (UTS namespace), its own /etc/hosts and its own /dev/shm
// (a persistent mount namespace; root's ~/.bashrc is empty there, so that an
// ssh command starts fast), joined by veth pairs to a bridge that lives
// in a namespace of its own. Nothing is added to the machine's own network
// namespace; the nodes have no default route, so no traffic leaves them.
//
// On top of the nodes it can run a multi-node Slurm (munged in the
// machine's namespace on a private socket, slurmctld on node 1, one slurmd
// per node, MPI plugin pmi2 available) and one sshd per node listening on
// the node's address, port 22, with a generated key that only this cluster
// accepts.
//
// Entry points:
//
//   - Start(ctx, Config) brings a cluster up (about 1–3 s here) and
//     returns a *Cluster; Stop tears it down completely: every process in
//     the nodes' namespaces is killed, the namespaces, mounts and files are
//     removed, and Stop fails when anything is left (Leftovers).
//   - Shared(t, Config) starts one cluster per test binary on first use
//     (tests skip, through internal/testenv with the feature "cluster",
//     when the machine cannot run one); StopShared, called from TestMain
//     after m.Run, stops it. Main does both.
//   - Cluster.Command(ctx, node, name, args...) runs a command inside node
//     k (1-based): that is where srun, salloc, sbatch, fabrun and
//     mpiexec.hydra must run, since only the nodes reach each other.
//     Cluster.Env() holds SLURM_CONF; Command adds it.
//   - Cluster.SSH() is an ssh command line (for fabrun --ssh) and
//     Cluster.SSHWrapper() an executable that behaves as ssh (for
//     mpiexec.hydra -launcher-exec); both log in to nodes by host name
//     (Cluster.Hosts()).
//   - Cluster.KillNode(k) kills every process of node k, as if the node had
//     died; Cluster.Procs(k) lists them.
//
// Names: every cluster is called weft-tc-<pid>-<seq>: its network
// namespaces are /run/netns/<name>-n1… and <name>-sw, its files live in
// /tmp/<name>. A cluster whose owning process died (a test binary that was
// killed) is swept by the next Start. The nodes are called n1, n2, … inside
// the cluster, with addresses 10.213.7.K/24.
//
// Requirements: root, util-linux's unshare and nsenter, iproute2's ip; for
// Slurm the Debian packages slurmd, slurmctld, slurm-client and munge
// (with /etc/munge/munge.key); for ssh openssh-server and openssh-client.
//
// Command-line use (deploy scripts, sbatch templates): go run
// ./test/cluster/tcrun -nodes 2 -- CMD runs CMD inside node 1 of a fresh
// cluster with SLURM_CONF set, then tears the cluster down.
package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Prefix starts the name of every cluster's namespaces and directory.
const Prefix = "weft-tc-"

// Subnet is the nodes' network (node k has Subnet + "." + k).
const Subnet = "10.213.7"

// Config says what a cluster runs.
type Config struct {
	// Nodes is the number of nodes, 1 to 8 (default 2).
	Nodes int
	// Slurm starts munged, slurmctld (on node 1) and a slurmd per node.
	Slurm bool
	// SSHD starts an sshd on each node.
	SSHD bool
	// CPUs is the CPU count each node announces to Slurm (default 2; with
	// SlurmdParameters=config_overrides it need not match the machine).
	CPUs int
	// NodeCPUs[k-1], when not empty, is the set of CPUs node k runs on:
	// an affinity mask that every process started in the node inherits
	// (its daemons, Command, ssh sessions and Slurm tasks; TaskPlugin is
	// task/none, so Slurm keeps it). Nodes without an entry run on every
	// CPU. Each CPU must be one this process may run on. ParseNodeCPUs
	// reads the command-line form. With no NodeCPUs at all, Start deals
	// the CPUs this process may run on to the nodes (SplitCPUs) unless
	// ShareCPUs is set.
	NodeCPUs [][]int
	// ShareCPUs runs every node on every CPU when NodeCPUs is empty. By
	// default each node gets its own share of the CPUs, as real nodes have
	// their own cores: a node's processes then see (in their affinity
	// mask, runtime.NumCPU) the cores they really have, and a program
	// that busy-polls, as weft's waits do, yields when a node holds more
	// ranks than cores. Nodes sharing every CPU each believe they have
	// them all; two nodes' busy-polling ranks then fill every core, and
	// on the 2-CPU VMs here that starved the kernel's timers and
	// workqueues for 30 to 55 s at a time (dmesg: "BUG: workqueue
	// lockup"), stalling every process on the machine.
	ShareCPUs bool
	// Wait bounds the start-up (default 60 s).
	Wait time.Duration
}

// ParseNodeCPUs parses NodeCPUs written as node sets separated by ':',
// each a comma-separated list of CPUs and ranges: "0:1" gives node 1
// CPU 0 and node 2 CPU 1, "0-1:2,3" gives node 1 CPUs 0 and 1 and node 2
// CPUs 2 and 3. An empty set leaves its node on every CPU.
func ParseNodeCPUs(s string) ([][]int, error) {
	if s == "" {
		return nil, nil
	}
	var sets [][]int
	for _, node := range strings.Split(s, ":") {
		var set []int
		for _, f := range strings.Split(node, ",") {
			if f == "" {
				continue
			}
			lo, hi, isRange := strings.Cut(f, "-")
			a, err := strconv.Atoi(lo)
			b := a
			if err == nil && isRange {
				b, err = strconv.Atoi(hi)
			}
			if err != nil || a < 0 || b < a {
				return nil, fmt.Errorf("testcluster: CPU set %q: bad element %q", node, f)
			}
			for cpu := a; cpu <= b; cpu++ {
				set = append(set, cpu)
			}
		}
		sets = append(sets, set)
	}
	return sets, nil
}

// SplitCPUs deals the CPUs this process may run on to nodes nodes: each
// node gets a contiguous share (the first ones one CPU more when they do
// not divide evenly); with fewer CPUs than nodes, the nodes take the CPUs
// in turn and share them.
func SplitCPUs(nodes int) ([][]int, error) {
	cpus, err := ownCPUs()
	if err != nil {
		return nil, err
	}
	return splitCPUs(nodes, cpus), nil
}

// ownCPUs lists the CPUs this process may run on, in order.
func ownCPUs() ([]int, error) {
	var own unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		return nil, fmt.Errorf("testcluster: CPU sets: %w", err)
	}
	var cpus []int
	for cpu := 0; cpu < len(own)*64; cpu++ {
		if own.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus, nil
}

func splitCPUs(nodes int, cpus []int) [][]int {
	if nodes < 1 || len(cpus) == 0 {
		return nil
	}
	sets := make([][]int, nodes)
	if len(cpus) < nodes {
		for k := range sets {
			sets[k] = []int{cpus[k%len(cpus)]}
		}
		return sets
	}
	per, extra, next := len(cpus)/nodes, len(cpus)%nodes, 0
	for k := range sets {
		n := per
		if k < extra {
			n++
		}
		sets[k] = slices.Clone(cpus[next : next+n])
		next += n
	}
	return sets
}

// checkNodeCPUs checks cfg.NodeCPUs against the CPUs this process may run
// on.
func checkNodeCPUs(cfg Config) error {
	if len(cfg.NodeCPUs) > cfg.Nodes {
		return fmt.Errorf("testcluster: CPU sets for %d nodes, the cluster has %d", len(cfg.NodeCPUs), cfg.Nodes)
	}
	own, err := ownCPUs()
	if err != nil {
		return err
	}
	for k, set := range cfg.NodeCPUs {
		for _, cpu := range set {
			if !slices.Contains(own, cpu) {
				return fmt.Errorf("testcluster: node %d: CPU %d is not one this process may run on (%d CPUs allowed)", k+1, cpu, len(own))
			}
		}
	}
	return nil
}

// Cluster is a running test cluster.
type Cluster struct {
	name  string
	dir   string
	cfg   Config
	mu    sync.Mutex
	procs []*exec.Cmd  // daemons started by this process
	specs []daemonSpec // how to start each node's daemons again (RestartNode)
	nsIno []uint64     // net namespace inode of each node (index 0 = node 1), then the switch
	down  bool
}

var seq atomic.Int64

// Name returns the cluster's name (weft-tc-<pid>-<seq>).
func (c *Cluster) Name() string { return c.name }

// Dir returns the cluster's directory: configs, logs, keys. Files written
// there (or anywhere outside /dev/shm and /etc/hosts) are visible on every
// node.
func (c *Cluster) Dir() string { return c.dir }

// Nodes returns the number of nodes.
func (c *Cluster) Nodes() int { return c.cfg.Nodes }

// Host returns node k's host name (k from 1).
func (c *Cluster) Host(k int) string { return "n" + strconv.Itoa(k) }

// Addr returns node k's IPv4 address.
func (c *Cluster) Addr(k int) string { return Subnet + "." + strconv.Itoa(k) }

// Hosts returns every node's host name.
func (c *Cluster) Hosts() []string {
	var hs []string
	for k := 1; k <= c.cfg.Nodes; k++ {
		hs = append(hs, c.Host(k))
	}
	return hs
}

// Env returns the environment entries commands in the cluster need
// (SLURM_CONF when Slurm runs).
func (c *Cluster) Env() []string {
	if !c.cfg.Slurm {
		return nil
	}
	return []string{"SLURM_CONF=" + c.path("slurm", "slurm.conf")}
}

// SSH returns the ssh command line (program and options) that logs in to
// the nodes as root, for fabrun --ssh.
func (c *Cluster) SSH() string { return "ssh -F " + c.path("ssh", "config") }

// SSHWrapper returns an executable that runs ssh with the cluster's
// configuration and passes its arguments on (mpiexec.hydra -launcher-exec).
func (c *Cluster) SSHWrapper() string { return c.path("ssh", "ssh") }

func (c *Cluster) path(p ...string) string { return filepath.Join(append([]string{c.dir}, p...)...) }

func (c *Cluster) netns(k int) string {
	if k == 0 {
		return c.name + "-sw"
	}
	return c.name + "-n" + strconv.Itoa(k)
}

// NSEnter returns the argument list that runs a command inside node k
// (nsenter into its network, UTS and mount namespaces); append the
// command.
func (c *Cluster) NSEnter(k int) []string {
	var pin []string
	if k >= 1 && k <= len(c.cfg.NodeCPUs) && len(c.cfg.NodeCPUs[k-1]) > 0 {
		pin = []string{"taskset", "-c", cpuList(c.cfg.NodeCPUs[k-1])}
	}
	return append(pin, "nsenter", "--net=/run/netns/"+c.netns(k), "--uts="+c.path("ns", "uts-n"+strconv.Itoa(k)),
		"--mount="+c.path("ns", "mnt-n"+strconv.Itoa(k)))
}

// cpuList writes a CPU set as taskset -c reads it.
func cpuList(set []int) string {
	s := make([]string, len(set))
	for i, cpu := range set {
		s[i] = strconv.Itoa(cpu)
	}
	return strings.Join(s, ",")
}

// Command returns a command that runs name inside node k (from 1) with the
// caller's environment plus Env. The working directory is the caller's.
func (c *Cluster) Command(ctx context.Context, k int, name string, args ...string) *exec.Cmd {
	argv := append(c.NSEnter(k), name)
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), c.Env()...)
	return cmd
}

// Missing returns why this machine cannot run a cluster with cfg ("" when
// it can).
func Missing(cfg Config) string {
	if os.Geteuid() != 0 {
		return "needs root (network, UTS and mount namespaces)"
	}
	bins := []string{"unshare", "nsenter", "ip", "mount", "umount"}
	if cfg.Slurm {
		bins = append(bins, "slurmctld", "slurmd", "munged", "srun", "sinfo")
	}
	if cfg.SSHD {
		bins = append(bins, "sshd", "ssh", "ssh-keygen")
	}
	if len(cfg.NodeCPUs) > 0 {
		bins = append(bins, "taskset")
	}
	for _, b := range bins {
		if _, err := lookPath(b); err != nil {
			return fmt.Sprintf("%s not installed (%v)", b, err)
		}
	}
	if cfg.Slurm {
		if _, err := os.Stat("/etc/munge/munge.key"); err != nil {
			return fmt.Sprintf("no munge key: %v", err)
		}
	}
	return ""
}

func lookPath(b string) (string, error) {
	if p, err := exec.LookPath(b); err == nil {
		return p, nil
	}
	return exec.LookPath("/usr/sbin/" + b)
}

// Start brings up a cluster. On error nothing of it is left running.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 2
	}
	if cfg.Nodes < 1 || cfg.Nodes > 8 {
		return nil, fmt.Errorf("testcluster: %d nodes, want 1 to 8", cfg.Nodes)
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
	}
	if cfg.Wait == 0 {
		cfg.Wait = 60 * time.Second
	}
	if len(cfg.NodeCPUs) == 0 && !cfg.ShareCPUs {
		sets, err := SplitCPUs(cfg.Nodes)
		if err != nil {
			return nil, err
		}
		cfg.NodeCPUs = sets
	}
	if why := Missing(cfg); why != "" {
		return nil, fmt.Errorf("testcluster: %s", why)
	}
	if err := checkNodeCPUs(cfg); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Wait)
	defer cancel()
	SweepStale()
	name := fmt.Sprintf("%s%d-%d", Prefix, os.Getpid(), seq.Add(1))
	c := &Cluster{name: name, dir: filepath.Join(os.TempDir(), name), cfg: cfg}
	if err := c.start(ctx); err != nil {
		if serr := c.Stop(); serr != nil {
			err = fmt.Errorf("%w (and tearing down: %v)", err, serr)
		}
		return nil, err
	}
	return c, nil
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("testcluster: %s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (c *Cluster) start(ctx context.Context) error {
	// The munge user must traverse the directory (munged's socket).
	if err := os.MkdirAll(c.path("ns"), 0o755); err != nil {
		return err
	}
	os.Chmod(c.dir, 0o755)
	// Persistent namespaces are bind mounts of nsfs files; they must live
	// on a mount with private propagation.
	if err := run(ctx, "mount", "--bind", c.path("ns"), c.path("ns")); err != nil {
		return err
	}
	if err := run(ctx, "mount", "--make-private", c.path("ns")); err != nil {
		return err
	}
	if err := run(ctx, "ip", "netns", "add", c.netns(0)); err != nil {
		return err
	}
	if err := run(ctx, "ip", "-n", c.netns(0), "link", "add", "br0", "type", "bridge"); err != nil {
		return err
	}
	if err := run(ctx, "ip", "-n", c.netns(0), "link", "set", "br0", "up"); err != nil {
		return err
	}
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1 localhost\n")
	for k := 1; k <= c.cfg.Nodes; k++ {
		fmt.Fprintf(&hosts, "%s %s\n", c.Addr(k), c.Host(k))
	}
	if err := os.WriteFile(c.path("hosts"), []byte(hosts.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("empty"), nil, 0o644); err != nil {
		return err
	}
	for k := 1; k <= c.cfg.Nodes; k++ {
		if err := c.addNode(ctx, k); err != nil {
			return err
		}
	}
	for k := 0; k <= c.cfg.Nodes; k++ {
		var st syscall.Stat_t
		if err := syscall.Stat("/run/netns/"+c.netns(k), &st); err != nil {
			return fmt.Errorf("testcluster: %w", err)
		}
		c.nsIno = append(c.nsIno, st.Ino)
	}
	if c.cfg.SSHD {
		if err := c.startSSHD(ctx); err != nil {
			return err
		}
	}
	if c.cfg.Slurm {
		if err := c.startSlurm(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) addNode(ctx context.Context, k int) error {
	ns, v := c.netns(k), "v"+strconv.Itoa(k)
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", v, "netns", c.netns(0)},
		{"ip", "-n", c.netns(0), "link", "set", v, "master", "br0", "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", c.Addr(k) + "/24", "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	uts, mnt := c.path("ns", "uts-n"+strconv.Itoa(k)), c.path("ns", "mnt-n"+strconv.Itoa(k))
	for _, f := range []string{uts, mnt} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			return err
		}
	}
	// One unshare makes the node's UTS and mount namespaces (kept alive by
	// their bind mounts) and sets them up: host name, hosts file, a
	// private /dev/shm, an empty ~/.bashrc for root.
	// root's ~/.bashrc, which bash reads for every ssh command, is empty on
	// the nodes: a machine's interactive set-up (pyenv here: 3 s per ssh)
	// has no place on a compute node.
	setup := fmt.Sprintf("hostname %s && mount --bind %s /etc/hosts && mount -t tmpfs -o size=1g,mode=1777 %s-shm /dev/shm"+
		" && if [ -f /root/.bashrc ]; then mount --bind %s /root/.bashrc; fi",
		c.Host(k), c.path("hosts"), c.name, c.path("empty"))
	return run(ctx, "unshare", "--uts="+uts, "--mount="+mnt, "--propagation", "private", "sh", "-c", setup)
}

// daemon starts a long-running process inside node k (k 0: in this
// machine's namespaces), its output to log. It dies with this process.
func (c *Cluster) daemon(k int, log string, env []string, argv ...string) (*exec.Cmd, error) {
	c.mu.Lock()
	c.specs = append(c.specs, daemonSpec{k, log, env, argv})
	c.mu.Unlock()
	return c.daemonAs(k, nil, log, env, argv...)
}

// daemonSpec is a daemon of a node, as daemon was asked to start it.
type daemonSpec struct {
	node     int
	log      string
	env, arg []string
}

// daemonAs is daemon with the given credentials (nil: this process's).
func (c *Cluster) daemonAs(k int, cred *syscall.Credential, log string, env []string, argv ...string) (*exec.Cmd, error) {
	if k > 0 {
		argv = append(c.NSEnter(k), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testcluster: start %s: %w", argv, err)
	}
	c.mu.Lock()
	c.procs = append(c.procs, cmd)
	c.mu.Unlock()
	go cmd.Wait() // reaps it; Stop checks /proc
	return cmd, nil
}

func (c *Cluster) startSSHD(ctx context.Context) error {
	dir := c.path("ssh")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return err
	}
	os.Chmod("/run/sshd", 0o755)
	for _, key := range []string{"host_key", "id"} {
		if err := run(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, key)); err != nil {
			return err
		}
	}
	cfg := fmt.Sprintf("Host n*\n  User root\n  IdentityFile %s/id\n  BatchMode yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n", dir)
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(cfg), 0o644); err != nil {
		return err
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nexec ssh -F %s/config \"$@\"\n", dir)
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(wrapper), 0o755); err != nil {
		return err
	}
	sshd, _ := lookPath("sshd")
	for k := 1; k <= c.cfg.Nodes; k++ {
		pidf := filepath.Join(dir, fmt.Sprintf("sshd-n%d.pid", k))
		conf := fmt.Sprintf("Port 22\nListenAddress %s\nHostKey %s/host_key\nPidFile %s\nAuthorizedKeysFile %s/id.pub\n"+
			"PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPrintMotd no\n",
			c.Addr(k), dir, pidf, dir)
		cf := filepath.Join(dir, fmt.Sprintf("sshd-n%d.conf", k))
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			return err
		}
		if _, err := c.daemon(k, filepath.Join(dir, fmt.Sprintf("sshd-n%d.log", k)), nil, sshd, "-D", "-e", "-f", cf); err != nil {
			return err
		}
	}
	// sshd writes its pid file once it listens.
	for k := 1; k <= c.cfg.Nodes; k++ {
		pidf := filepath.Join(dir, fmt.Sprintf("sshd-n%d.pid", k))
		if err := waitFor(ctx, func() bool { st, err := os.Stat(pidf); return err == nil && st.Size() > 0 }); err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("sshd-n%d.log", k)))
			return fmt.Errorf("testcluster: sshd on node %d did not start: %w\n%s", k, err, b)
		}
	}
	return nil
}

func waitFor(ctx context.Context, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func (c *Cluster) startSlurm(ctx context.Context) error {
	dir := c.path("slurm")
	mdir := c.path("munge")
	for _, d := range []string{dir, filepath.Join(dir, "state"), mdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := run(ctx, "chown", "munge:munge", mdir); err != nil {
		return err
	}
	munged, _ := lookPath("munged")
	u, err := user.Lookup("munge")
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if _, err := c.daemonAs(0, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, filepath.Join(mdir, "munged.out"), nil, munged, "-F",
		"--socket="+filepath.Join(mdir, "munge.socket"), "--pid-file="+filepath.Join(mdir, "munged.pid"),
		"--seed-file="+filepath.Join(mdir, "seed"), "--log-file="+filepath.Join(mdir, "munged.log"),
		"--key-file=/etc/munge/munge.key"); err != nil {
		return err
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, `ClusterName=%s
SlurmctldHost=n1(%s)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%s
StateSaveLocation=%s/state
SlurmdSpoolDir=%s/spool-%%n
SlurmctldPidFile=%s/slurmctld.pid
SlurmdPidFile=%s/slurmd-%%n.pid
SlurmctldLogFile=%s/slurmctld.log
SlurmdLogFile=%s/slurmd-%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
InactiveLimit=0
KillWait=2
MessageTimeout=10
SlurmdTimeout=10
`, strings.ReplaceAll(c.name, "-", ""), c.Addr(1), filepath.Join(mdir, "munge.socket"), dir, dir, dir, dir, dir, dir)
	for k := 1; k <= c.cfg.Nodes; k++ {
		fmt.Fprintf(&conf, "NodeName=%s NodeAddr=%s CPUs=%d State=UNKNOWN\n", c.Host(k), c.Addr(k), c.cfg.CPUs)
	}
	fmt.Fprintf(&conf, "PartitionName=debug Nodes=n[1-%d] Default=YES MaxTime=INFINITE State=UP\n", c.cfg.Nodes)
	if err := os.WriteFile(filepath.Join(dir, "slurm.conf"), []byte(conf.String()), 0o644); err != nil {
		return err
	}
	sock := filepath.Join(mdir, "munge.socket")
	if err := waitFor(ctx, func() bool { _, err := os.Stat(sock); return err == nil }); err != nil {
		b, _ := os.ReadFile(filepath.Join(mdir, "munged.log"))
		return fmt.Errorf("testcluster: munged did not start: %w\n%s", err, b)
	}
	env := c.Env()
	slurmctld, _ := lookPath("slurmctld")
	slurmd, _ := lookPath("slurmd")
	if _, err := c.daemon(1, filepath.Join(dir, "slurmctld.out"), env, slurmctld, "-i", "-D"); err != nil {
		return err
	}
	for k := 1; k <= c.cfg.Nodes; k++ {
		if _, err := c.daemon(k, filepath.Join(dir, fmt.Sprintf("slurmd-n%d.out", k)), env, slurmd, "-D"); err != nil {
			return err
		}
	}
	return c.WaitIdle(ctx)
}

// Procs returns the pids of the live processes of node k (those in its
// network namespace); k 0 is the switch's namespace.
func (c *Cluster) Procs(k int) []int {
	if k < 0 || k >= len(c.nsIno) {
		return nil
	}
	return procsIn(map[uint64]bool{c.nsIno[k]: true})
}

// procsIn lists the live (not zombie) processes whose network namespace
// has one of the inodes.
func procsIn(inos map[uint64]bool) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name()+"/ns/net", &st) != nil || !inos[st.Ino] {
			continue
		}
		if zombie(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// KillNode SIGKILLs every process of node k, as if the node had failed,
// and waits (at most 5 s) until they are gone. It returns how many it
// killed. The node's namespaces stay; its daemons do not come back.
func (c *Cluster) KillNode(k int) (int, error) {
	if k < 1 || k > c.cfg.Nodes {
		return 0, fmt.Errorf("testcluster: no node %d", k)
	}
	return killAll(map[uint64]bool{c.nsIno[k]: true}, 5*time.Second)
}

// RestartNode starts node k's daemons (sshd, slurmd, and slurmctld on
// node 1) again after KillNode, and waits until they serve: sshd's pid
// file, the node idle in Slurm.
func (c *Cluster) RestartNode(ctx context.Context, k int) error {
	if k < 1 || k > c.cfg.Nodes {
		return fmt.Errorf("testcluster: no node %d", k)
	}
	if p := c.Procs(k); len(p) > 0 {
		return fmt.Errorf("testcluster: node %d still runs %v", k, p)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Wait)
	defer cancel()
	c.mu.Lock()
	specs := slices.Clone(c.specs)
	c.mu.Unlock()
	for _, d := range specs {
		if d.node != k {
			continue
		}
		if d.arg[0] == "sshd" || strings.HasSuffix(d.arg[0], "/sshd") {
			os.Remove(c.path("ssh", fmt.Sprintf("sshd-n%d.pid", k)))
		}
		if _, err := c.daemonAs(k, nil, d.log, d.env, d.arg...); err != nil {
			return err
		}
	}
	if c.cfg.SSHD {
		pidf := c.path("ssh", fmt.Sprintf("sshd-n%d.pid", k))
		if err := waitFor(ctx, func() bool { st, err := os.Stat(pidf); return err == nil && st.Size() > 0 }); err != nil {
			return fmt.Errorf("testcluster: sshd on node %d did not restart: %w", k, err)
		}
	}
	if c.cfg.Slurm {
		return c.WaitIdle(ctx)
	}
	return nil
}

// WaitIdle waits until Slurm reports every node idle (no job running or
// completing anywhere).
func (c *Cluster) WaitIdle(ctx context.Context) error {
	var last string
	err := waitFor(ctx, func() bool {
		out, _ := c.Command(ctx, 1, "sinfo", "-h", "-N", "-o", "%t").Output()
		last = string(out)
		return strings.Count(last, "idle") == c.cfg.Nodes
	})
	if err != nil {
		b, _ := os.ReadFile(c.path("slurm", "slurmctld.log"))
		return fmt.Errorf("testcluster: Slurm nodes not idle (sinfo: %q): %w\nslurmctld.log:\n%s", last, err, b)
	}
	return nil
}

// killAll SIGKILLs the processes in the namespaces until none is left.
func killAll(inos map[uint64]bool, wait time.Duration) (int, error) {
	killed := map[int]bool{}
	deadline := time.Now().Add(wait)
	for {
		pids := procsIn(inos)
		if len(pids) == 0 {
			return len(killed), nil
		}
		if time.Now().After(deadline) {
			return len(killed), fmt.Errorf("testcluster: processes %v survive SIGKILL", pids)
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
			killed[p] = true
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop tears the cluster down: it kills every process in its namespaces
// and the daemons it started, deletes the namespaces, unmounts and removes
// its files, then checks that nothing of it is left (Leftovers). Stop is
// idempotent.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.down {
		c.mu.Unlock()
		return nil
	}
	c.down = true
	procs := c.procs
	c.mu.Unlock()
	var errs []error
	// Processes first: a namespace lives as long as one of its processes.
	inos := map[uint64]bool{}
	for _, ino := range c.nsIno {
		inos[ino] = true
	}
	if _, err := killAll(inos, 10*time.Second); err != nil {
		errs = append(errs, err)
	}
	for _, p := range procs { // munged (this machine's namespace)
		if p.Process != nil {
			syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			syscall.Kill(p.Process.Pid, syscall.SIGKILL)
		}
	}
	errs = append(errs, teardown(c.name, c.dir))
	for _, p := range procs {
		if p.Process == nil {
			continue
		}
		waitFor(context.Background(), func() bool { // reaped by the goroutine in daemon
			err := syscall.Kill(p.Process.Pid, 0)
			return err != nil || zombie(p.Process.Pid) || p.ProcessState != nil
		})
	}
	if left := Leftovers(c.name); len(left) > 0 {
		errs = append(errs, fmt.Errorf("testcluster: left after stop: %s", strings.Join(left, "; ")))
	}
	return errors.Join(errs...)
}

// teardown removes what the cluster name made: namespaces, mounts, files.
func teardown(name, dir string) error {
	var errs []error
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		// Innermost first.
		var mps []string
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") || len(f) > 4 && f[4] == dir {
				mps = append(mps, f[4])
			}
		}
		for i := len(mps) - 1; i >= 0; i-- {
			if err := syscall.Unmount(mps[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("testcluster: umount %s: %w", mps[i], err))
			}
		}
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), name+"-") {
			if err := run(context.Background(), "ip", "netns", "del", e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Leftovers lists what of the cluster called name still exists: network
// namespaces, mounts of its directory, its directory. (Processes of a
// deleted namespace cannot be found by name; Stop checks them itself.)
func Leftovers(name string) []string {
	var left []string
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), name+"-") {
			left = append(left, "netns "+e.Name())
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, name) {
				left = append(left, "mount "+l)
			}
		}
	}
	dir := filepath.Join(os.TempDir(), name)
	if _, err := os.Stat(dir); err == nil {
		left = append(left, "directory "+dir)
	}
	return left
}

// SweepStale tears down clusters whose owning process is gone (a test
// binary killed before its cleanup ran).
func SweepStale() {
	seen := map[string]bool{}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if n, ok := staleName(e.Name()); ok {
			seen[n] = true
		}
	}
	tmp, _ := os.ReadDir(os.TempDir())
	for _, e := range tmp {
		if n, ok := staleName(e.Name() + "-x"); ok {
			seen[n] = true
		}
	}
	for n := range seen {
		// Its processes: those in its namespaces.
		inos := map[uint64]bool{}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), n+"-") {
				var st syscall.Stat_t
				if syscall.Stat("/run/netns/"+e.Name(), &st) == nil {
					inos[st.Ino] = true
				}
			}
		}
		killAll(inos, 5*time.Second)
		teardown(n, filepath.Join(os.TempDir(), n))
	}
}

// staleName returns the cluster name in a namespace name
// weft-tc-<pid>-<seq>-<node> whose pid is not alive.
func staleName(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return "", false
	}
	f := strings.SplitN(rest, "-", 3)
	if len(f) < 3 {
		return "", false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return "", false
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		return "", false
	}
	if syscall.Kill(pid, 0) == nil && !zombie(pid) {
		return "", false
	}
	return Prefix + f[0] + "-" + f[1], true
}

// KernelStalls returns the kernel's reports of stalled workqueues so far
// ("BUG: workqueue lockup" lines of dmesg), or nil when there are none or
// dmesg cannot be read. A new report during a test means the whole
// machine stalled (see Config.ShareCPUs): a job that timed out then is the
// machine's fault, not the job's.
func KernelStalls() []string {
	out, err := exec.Command("dmesg", "-T").Output()
	if err != nil {
		return nil
	}
	var stalls []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "workqueue lockup") {
			stalls = append(stalls, l)
		}
	}
	return stalls
}
