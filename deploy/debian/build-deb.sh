#!/usr/bin/env bash
# build-deb.sh builds the Debian package of weft with dpkg-deb alone (no
# debhelper): fabrun and fabrun-info in /usr/bin, the modulefile for
# Debian's environment-modules, the user docs and the sbatch templates.
# It depends on what building a weft program needs (libfabric-dev, gcc,
# pkg-config) and on libfabric1, which weft loads at run time.
#
#   deploy/debian/build-deb.sh OUTDIR      (make deb: OUTDIR is bin/)
#
# Writes OUTDIR/weft_VERSION_ARCH.deb and prints its path. VERSION comes from
# deploy/VERSION; DEBFULLNAME and DEBEMAIL name the maintainer.
set -euo pipefail

out=${1:?usage: $0 OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=$(cat "$root/deploy/VERSION")
arch=$(dpkg --print-architecture)
maint="${DEBFULLNAME:-weft builder} <${DEBEMAIL:-root@localhost}>"
go=${GO:-go}

stage=$(mktemp -d)
chmod 755 "$stage"
trap 'rm -rf "$stage"' EXIT
umask 022
doc=$stage/usr/share/doc/weft
mkdir -p "$stage/DEBIAN" "$stage/usr/bin" "$doc/examples/slurm" "$stage/usr/share/modules/modulefiles/weft"

# Stripped binaries (-s -w), built like `make build` otherwise.
(cd "$root" && CGO_ENABLED=1 "$go" build -ldflags='-s -w' -o "$stage/usr/bin/" ./cmd/fabrun ./cmd/fabrun/fabrun-info)

install -m 644 "$root/deploy/modules/weft/$version" "$stage/usr/share/modules/modulefiles/weft/$version"
install -m 644 "$root"/deploy/slurm/*.sbatch "$doc/examples/slurm/"
for f in README.md docs/deploy.md docs/fabrun.md; do
	install -m 644 "$root/$f" "$doc/$(basename "$f")"
done
gzip -9n "$doc"/*.md
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
printf 'weft (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
	"$version" "$commit" "$maint" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(date +%s)}")" |
	gzip -9n >"$doc/changelog.Debian.gz"
cat >"$doc/copyright" <<COPY
weft: Go communication middleware for HPC on libfabric
Source: https://github.com/weft-hpc/weft

Copyright: the weft authors.
The source tree this package was built from (commit $commit) carries no
license file; ask its authors before redistributing this package.
COPY

# The newest glibc symbol version the binaries use is libc6's lower bound.
glibc=$(objdump -T "$stage"/usr/bin/* | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat >"$stage/DEBIAN/control" <<CONTROL
Package: weft
Version: $version
Architecture: $arch
Maintainer: $maint
Installed-Size: $size
Depends: libc6 (>= $glibc), libfabric1 (>= 1.17), libfabric-dev (>= 1.17), gcc, pkg-config
Recommends: libfabric-bin
Suggests: environment-modules, slurm-client, mpich
Section: net
Priority: optional
Homepage: https://github.com/weft-hpc/weft
Description: Go communication middleware for HPC on libfabric (launcher)
 weft gives Go programs MPI-style point-to-point messaging, endpoints,
 collectives, one-sided windows and derived datatypes over libfabric
 (shm, tcp, verbs for InfiniBand and RoCE, efa).
 .
 This package installs fabrun, which starts weft programs on one machine,
 over ssh or under Slurm, and fabrun info; a modulefile for
 environment-modules (module load weft); sbatch templates; and the
 libfabric headers, C compiler and pkg-config that building a weft program
 with Go needs. Go itself (>= 1.26.8) is not packaged by Debian 12.
CONTROL
(cd "$stage" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 644 "$stage/DEBIAN/control" "$stage/DEBIAN/md5sums"

mkdir -p "$out"
deb="$out/weft_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zgzip --build "$stage" "$deb" >/dev/null
echo "$deb"
