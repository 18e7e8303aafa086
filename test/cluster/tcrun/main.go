// Command tcrun starts a test cluster (internal/testcluster: network
// namespace nodes n1…nN with Slurm and an sshd each), runs one command
// inside node 1 with SLURM_CONF set, tears the cluster down and exits
// with the command's status. It needs root.
//
//	go run ./test/cluster/tcrun [-nodes 2] [-slurm=true] [-sshd=true] -- CMD [ARGS...]
//	go run ./test/cluster/tcrun -- sbatch --wait -N 2 job.sh
//	go run ./test/cluster/tcrun -- sh -c 'fabrun --ssh "$TC_SSH" --hosts n1,n2 hostname'
//
// The command also gets TC_SSH (an ssh command line that reaches every
// node, for fabrun --ssh), TC_SSH_WRAPPER (the same as one executable, for
// mpiexec.hydra -launcher-exec), TC_HOSTS (n1,n2,…) and TC_DIR (the
// cluster's directory, visible on every node). nsenter arguments for the
// other nodes are in TC_NSENTER_<k>.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/weft-hpc/weft/internal/testcluster"
)

func main() {
	os.Exit(run())
}

func run() int {
	nodes := flag.Int("nodes", 2, "number of nodes (1 to 8)")
	slurm := flag.Bool("slurm", true, "run Slurm (munged, slurmctld, a slurmd per node)")
	sshd := flag.Bool("sshd", true, "run an sshd per node")
	cpus := flag.Int("cpus", 2, "CPUs each node announces to Slurm")
	nodeCPUs := flag.String("node-cpus", "", "CPUs each node runs on, node sets separated by ':' (\"0:1\": node 1 on CPU 0, node 2 on CPU 1); default: this process's CPUs dealt to the nodes")
	shareCPUs := flag.Bool("share-cpus", false, "run every node on every CPU (when -node-cpus is empty)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: tcrun [flags] -- CMD [ARGS...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sets, err := testcluster.ParseNodeCPUs(*nodeCPUs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tcrun: -node-cpus: %v\n", err)
		return 2
	}
	c, err := testcluster.Start(ctx, testcluster.Config{Nodes: *nodes, Slurm: *slurm, SSHD: *sshd, CPUs: *cpus, NodeCPUs: sets, ShareCPUs: *shareCPUs})
	if err != nil {
		fmt.Fprintf(os.Stderr, "tcrun: %v\n", err)
		return 1
	}
	code := 0
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "tcrun: %v\n", err)
		}
	}()
	cmd := c.Command(ctx, 1, flag.Arg(0), flag.Args()[1:]...)
	cmd.Env = append(cmd.Env, "TC_SSH="+c.SSH(), "TC_SSH_WRAPPER="+c.SSHWrapper(),
		"TC_HOSTS="+strings.Join(c.Hosts(), ","), "TC_DIR="+c.Dir())
	for k := 1; k <= c.Nodes(); k++ {
		cmd.Env = append(cmd.Env, "TC_NSENTER_"+strconv.Itoa(k)+"="+strings.Join(c.NSEnter(k), " "))
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			fmt.Fprintf(os.Stderr, "tcrun: %v\n", err)
			code = 1
		}
	}
	return code
}
