# Spack recipe for weft: spack repo add deploy/spack; spack install weft
from spack.package import *


class Weft(Package):
    """weft: Go communication middleware for HPC on libfabric (endpoints,
    collectives, one-sided windows, derived datatypes). Installs the fabrun
    launcher and fabrun-info; Go programs import github.com/weft-hpc/weft
    and build with cgo against the same libfabric, which this package's
    run environment points to."""

    homepage = "https://github.com/weft-hpc/weft"
    git = "https://github.com/weft-hpc/weft.git"

    version("main", branch="main")
    version("0.1.0", tag="v0.1.0")

    depends_on("c", type="build")
    depends_on("go@1.26.8:", type="build")
    depends_on("libfabric@1.17:", type=("build", "link", "run"))

    def setup_build_environment(self, env):
        env.set("CGO_ENABLED", "1")
        env.append_flags("CGO_CPPFLAGS", "-I" + self.spec["libfabric"].prefix.include)
        env.set("GOPATH", join_path(self.stage.path, "gopath"))
        env.set("GOFLAGS", "-trimpath")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        go = Executable(spec["go"].prefix.bin.go)
        go("build", "-o", prefix.bin + "/", "./cmd/fabrun", "./cmd/fabrun/fabrun-info")
        mkdirp(prefix.share.weft.slurm)
        for f in find("deploy/slurm", "*.sbatch"):
            install(f, prefix.share.weft.slurm)

    def setup_run_environment(self, env):
        # What a go build of a weft program needs; weft loads libfabric.so.1
        # at run time, found through LD_LIBRARY_PATH.
        env.set("CGO_ENABLED", "1")
        env.append_flags("CGO_CPPFLAGS", "-I" + self.spec["libfabric"].prefix.include)
        env.prepend_path("LD_LIBRARY_PATH", self.spec["libfabric"].prefix.lib)
