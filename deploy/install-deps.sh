#!/usr/bin/env bash
# install-deps.sh installs the Debian packages weft needs, idempotently.
#
#   deploy/install-deps.sh build   libfabric headers and tools (make demo)
#   deploy/install-deps.sh test    everything the test suite runs against:
#                                  libfabric, MPICH (Hydra), Slurm + munge, sshd,
#                                  environment-modules (the modulefile's test)
#                                  and gpu/'s tools (deploy/install-gpu-tools.sh:
#                                  pocl, ptxas, libcuda1; no GPU needed)
#   deploy/install-deps.sh bench   the test set plus Open MPI, the second MPI
#                                  the side-by-side benchmarks compare with,
#                                  and UCX (active messages' peer)
#
# Packages already present are not reinstalled; apt runs through sudo when
# the caller is not root.
set -euo pipefail

want=(libfabric-dev libfabric-bin gcc pkg-config)
mode="${1:-build}"
if [ "$mode" = test ] || [ "$mode" = bench ]; then
	want+=(mpich libmpich-dev slurmd slurmctld slurm-client slurm-wlm-basic-plugins munge
		openssh-server openssh-client procps iproute2 environment-modules)
fi

if [ "$mode" = bench ]; then
	want+=(openmpi-bin libopenmpi-dev libucx-dev)
fi

if [ "$mode" = test ] || [ "$mode" = bench ]; then
	"$(dirname "$0")/install-gpu-tools.sh"
fi

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# Wait for a dpkg lock another apt holds instead of failing at once.
lock=(-o DPkg::Lock::Timeout=300)
$sudo apt-get "${lock[@]}" update -qq
$sudo apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
