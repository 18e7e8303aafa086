// Package cluster holds weft's tests across nodes: jobs on the test cluster
// of internal/testcluster (network-namespace nodes on this machine, with a
// multi-node Slurm and an sshd per node), started once per test binary.
// They launch test/cluster/hybrid (endpoints, typed messages, collectives
// and windows with ranks on two nodes, two per node) and examples/hello
// through fabrun over ssh, srun --mpi=pmi2, salloc + fabrun, sbatch and
// mpiexec.hydra, check provider choice across nodes, and kill a node in
// the middle of a job. They skip (feature "cluster") where the machine
// cannot run the cluster.
package cluster
