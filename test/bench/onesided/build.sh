#!/usr/bin/env bash
# build.sh compiles the MPI_Put comparison program against MPICH and Open MPI
# (Debian: apt-get install libmpich-dev libopenmpi-dev openmpi-bin mpich).
# Output: test/bench/onesided/bin/mpi_put_mpich and mpi_put_ompi (git-ignored).
# A missing MPI is reported and skipped, not fatal.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$here/bin"
built=0
if command -v mpicc.mpich >/dev/null; then
	mpicc.mpich -O2 -o "$here/bin/mpi_put_mpich" "$here/mpi/mpi_put.c" && built=$((built + 1))
else
	echo "build.sh: mpicc.mpich not found (apt-get install libmpich-dev); MPICH column skipped" >&2
fi
if command -v mpicc.openmpi >/dev/null; then
	mpicc.openmpi -O2 -o "$here/bin/mpi_put_ompi" "$here/mpi/mpi_put.c" && built=$((built + 1))
else
	echo "build.sh: mpicc.openmpi not found (apt-get install libopenmpi-dev openmpi-bin); Open MPI column skipped" >&2
fi
echo "build.sh: built $built MPI program(s) in $here/bin" >&2
