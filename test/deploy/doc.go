// Package deploy holds the tests of deploy/ (no library code): the sbatch
// templates submitted to a private Slurm, the environment-modules
// modulefile loaded by a login shell, the Debian package built by
// `make deb` and installed into a scratch root, and the checks that can run
// here of the Apptainer definition and the Spack recipe. A test skips only
// when a tool is truly unavailable, and says why.
package deploy
