// Package launchers holds weft's real-launcher tests (no library code): they
// run cmd/fabrun and examples/hello under MPICH's mpiexec.hydra, fabrun's
// ssh launcher against an sshd the test starts on a localhost port, and a
// private single-node Slurm (deploy/slurm/single-node.sh). A test skips only
// when a launcher or daemon is truly unavailable, and says why.
// startup-bench.sh times fabrun against mpiexec.hydra (docs/perf/fabrun.md).
package launchers
