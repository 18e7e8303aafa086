package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// moduleScript runs in a login bash (which defines `module` through
// /etc/profile.d/modules.sh): it loads weft, reports what the module set,
// runs a job and a compile with it, unloads it and reports again. Lines
// "K=V" are read by the test.
const moduleScript = `
export PATH="$PATH:$GO_BIN"
echo "before.fabrun=$(command -v fabrun)"
module use "$PREFIX/share/modules/modulefiles"
module load weft || exit 10
echo "loaded=$LOADEDMODULES"
echo "fabrun=$(command -v fabrun)"
echo "CGO_ENABLED=$CGO_ENABLED"
echo "CGO_CPPFLAGS=$CGO_CPPFLAGS"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
echo "go.env=$(go env CGO_ENABLED CGO_CPPFLAGS | tr '\n' ' ')"
echo "pkgconfig=$(pkg-config --cflags libfabric)"
echo "header=$(echo '#include <rdma/fabric.h>' | gcc $CGO_CPPFLAGS -M -x c - | tr -d '\\\n' | tr ' ' '\n' | grep '/rdma/fabric.h$')"
fabrun -n 2 --provider shm --tag-output --env LD_DEBUG=libs "$HELLO" >"$OUT/job.out" 2>"$OUT/job.err"
echo "job=$?"
unset LIBFABRIC_ROOT
module unload weft
echo "after.loaded=$LOADEDMODULES"
echo "after.fabrun=$(command -v fabrun)"
for v in CGO_ENABLED CGO_CPPFLAGS LD_LIBRARY_PATH PKG_CONFIG_PATH _WEFT_LIBFABRIC_ROOT; do
	echo "after.$v=${!v-unset}"
done
`

// TestModulefile loads deploy/modules/weft/VERSION with Debian's
// environment-modules in a login bash, from a scratch install prefix, with a
// libfabric installed outside the system paths (a scratch root whose
// headers and library link to the system's, as a site build would be):
// fabrun is on PATH, cgo is on, gcc takes libfabric's header from that
// root, pkg-config finds it there, a job's ranks load libfabric.so.1 from
// it; after unload nothing of it is left in the environment.
func TestModulefile(t *testing.T) {
	t.Parallel() // each waits mostly on other processes
	if _, err := os.Stat("/usr/share/modules/init/bash"); err != nil {
		testenv.Skip(t, "environment-modules", "Debian package environment-modules not installed: %v", err)
	}
	sysLib, sysPC := "/usr/lib/x86_64-linux-gnu/libfabric.so.1", "/usr/lib/x86_64-linux-gnu/pkgconfig/libfabric.pc"
	for _, f := range []string{sysLib, sysPC, "/usr/include/rdma/fabric.h"} {
		if _, err := os.Stat(f); err != nil {
			testenv.Skip(t, "libfabric-dev", "%s missing (Debian package libfabric-dev on amd64): %v", f, err)
		}
	}
	bin := binDir(t)
	tmp := t.TempDir()

	prefix := installPrefix(t)

	// A libfabric root of its own: include/rdma, lib/libfabric.so.1 and a
	// relocated lib/pkgconfig/libfabric.pc.
	lf := filepath.Join(tmp, "libfabric")
	for _, d := range []string{"include", "lib/pkgconfig"} {
		if err := os.MkdirAll(filepath.Join(lf, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.Symlink("/usr/include/rdma", filepath.Join(lf, "include", "rdma")))
	must(t, os.Symlink(sysLib, filepath.Join(lf, "lib", "libfabric.so.1")))
	pc, err := os.ReadFile(sysPC)
	must(t, err)
	var lines []string
	for _, l := range strings.Split(string(pc), "\n") {
		switch {
		case strings.HasPrefix(l, "prefix="):
			l = "prefix=" + lf
		case strings.HasPrefix(l, "libdir="):
			l = "libdir=${prefix}/lib"
		case strings.HasPrefix(l, "includedir="):
			l = "includedir=${prefix}/include"
		}
		lines = append(lines, l)
	}
	must(t, os.WriteFile(filepath.Join(lf, "lib", "pkgconfig", "libfabric.pc"), []byte(strings.Join(lines, "\n")), 0o644))

	out := filepath.Join(tmp, "out")
	must(t, os.Mkdir(out, 0o755))
	home, _ := os.UserHomeDir()
	// A login shell with a clean environment, as after ssh to a login node.
	env := []string{"HOME=" + home, "TERM=dumb", "LIBFABRIC_ROOT=" + lf, "PREFIX=" + prefix, "OUT=" + out,
		"HELLO=" + filepath.Join(bin, "hello"), "GO_BIN=" + filepath.Dir(proctest.GoTool())}
	r := proctest.Run(t, 90*time.Second, nil, "", "env", append(append([]string{"-i"}, env...), "bash", "-l", "-c", moduleScript)...)
	if r.Code != 0 {
		t.Fatalf("login bash: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	got := map[string]string{}
	for _, l := range strings.Split(r.Stdout, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	want := map[string]string{
		"loaded":          "weft/" + version(t),
		"fabrun":          filepath.Join(prefix, "bin", "fabrun"),
		"CGO_ENABLED":     "1",
		"CGO_CPPFLAGS":    "-I" + lf + "/include",
		"LD_LIBRARY_PATH": lf + "/lib",
		"PKG_CONFIG_PATH": lf + "/lib/pkgconfig",
		"go.env":          "1 -I" + lf + "/include ",
		"pkgconfig":       "-I" + lf + "/include ",
		"header":          lf + "/include/rdma/fabric.h",
		"job":             "0",
		"after.loaded":    "",
		"after.fabrun":    "",
	}
	for _, v := range []string{"CGO_ENABLED", "CGO_CPPFLAGS", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "_WEFT_LIBFABRIC_ROOT"} {
		want["after."+v] = "unset"
	}
	if got["before.fabrun"] == want["fabrun"] {
		t.Errorf("fabrun of the scratch prefix on PATH before module load")
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	jobOut, _ := os.ReadFile(filepath.Join(out, "job.out"))
	jobErr, _ := os.ReadFile(filepath.Join(out, "job.err"))
	for rank := range 2 {
		if !strings.Contains(string(jobOut), fmt.Sprintf("[%d] rank %d of 2 on ", rank, rank)) || strings.Count(string(jobOut), ": ring ok") != 2 {
			t.Errorf("job under the module: no ring ok of rank %d:\n%s", rank, jobOut)
		}
	}
	// Each rank's dynamic loader opened libfabric from the module's root.
	if c := strings.Count(string(jobErr), "calling init: "+lf+"/lib/libfabric.so.1"); c != 2 {
		t.Errorf("%d ranks loaded %s/lib/libfabric.so.1, want 2; loader lines:\n%s", c, lf, grepLines(string(jobErr), "libfabric"))
	}
	if t.Failed() {
		t.Logf("login bash output:\n%s%s", r.Stdout, r.Stderr)
	}

	// Loading fails, saying why, when the modulefile is not next to a
	// fabrun and names no prefix.
	lone := filepath.Join(tmp, "lone", "weft")
	must(t, os.MkdirAll(lone, 0o755))
	copyFile(t, deployFile(t, "modules/weft/"+version(t)), filepath.Join(lone, version(t)), 0o644)
	r = proctest.Run(t, 30*time.Second, nil, "", "env", "-i", "HOME="+home, "TERM=dumb", "DIR="+filepath.Dir(lone),
		"bash", "-l", "-c", `module use "$DIR"; module load weft; echo "loaded=$LOADEDMODULES"`)
	if !strings.Contains(r.Stderr, "no fabrun in") || strings.Contains(r.Stdout, "loaded=weft") {
		t.Errorf("module load without fabrun next to it: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// copyFile copies src to dst with mode perm.
func copyFile(t *testing.T, src, dst string, perm os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	must(t, err)
	must(t, os.WriteFile(dst, b, perm))
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
