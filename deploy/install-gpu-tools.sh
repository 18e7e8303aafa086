#!/usr/bin/env bash
# install-gpu-tools.sh prepares what gpu/'s tests use on a machine without a
# GPU, idempotently:
#
#   pocl + the OpenCL ICD loader   OpenCL C kernels run on the CPU (Debian main)
#   ptxas 11.8                     PTX assembled for sm_80/sm_90; extracted from
#                                  Debian non-free's nvidia-cuda-toolkit .deb
#                                  into $WEFT_GPU_TOOLS (not installed)
#   libcuda1                       the CUDA driver's user library, so gpu/'s
#                                  dlopen and no-device paths run for real
#
# The non-free component is enabled only for the duration of the script
# (a temporary deb822 file, removed afterwards, apt lists refreshed).
# apt runs through sudo when the caller is not root.
set -euo pipefail

tools=${WEFT_GPU_TOOLS:-/var/cache/weft-gpu-tools}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
apt=(apt-get -o DPkg::Lock::Timeout=600 -qq)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

main=()
for p in pocl-opencl-icd ocl-icd-opencl-dev ocl-icd-libopencl1; do
	installed "$p" || main+=("$p")
done
if [ ${#main[@]} -gt 0 ]; then
	echo "install-gpu-tools: installing ${main[*]}" >&2
	$sudo "${apt[@]}" update
	$sudo "${apt[@]}" install -y --no-install-recommends "${main[@]}" >/dev/null
fi

need_ptxas=1
[ -x "$tools/bin/ptxas" ] && need_ptxas=0
need_cuda=1
installed libcuda1 && need_cuda=0
[ $need_ptxas -eq 0 ] && [ $need_cuda -eq 0 ] && exit 0

src=/etc/apt/sources.list.d/weft-nonfree-tmp.sources
cleanup() { $sudo rm -f "$src"; $sudo "${apt[@]}" update || true; }
trap cleanup EXIT
$sudo tee "$src" >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
$sudo "${apt[@]}" update
if [ $need_cuda -eq 1 ]; then
	echo "install-gpu-tools: installing libcuda1 (no device needed)" >&2
	$sudo "${apt[@]}" install -y --no-install-recommends libcuda1 >/dev/null
fi
if [ $need_ptxas -eq 1 ]; then
	echo "install-gpu-tools: extracting ptxas into $tools" >&2
	tmp=$(mktemp -d)
	chmod 755 "$tmp" # apt downloads as _apt
	(cd "$tmp" && apt-get -qq download nvidia-cuda-toolkit && dpkg-deb -x nvidia-cuda-toolkit_*.deb x)
	$sudo mkdir -p "$tools/bin"
	$sudo cp "$tmp/x/usr/bin/ptxas" "$tmp/x/usr/bin/cuobjdump" "$tools/bin/"
	rm -rf "$tmp"
fi
