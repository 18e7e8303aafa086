package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// TestDebianPackage builds the package with `make deb`, reads its control
// fields and file list back with dpkg-deb, installs it with dpkg into a
// scratch root whose dpkg database holds this machine's copies of the
// dependencies (so dpkg checks them for real), runs the installed fabrun
// on a two-rank job, fabrun info and the installed modulefile, and purges
// it. This machine's own dpkg database is never touched.
func TestDebianPackage(t *testing.T) {
	t.Parallel() // each waits mostly on other processes
	for _, b := range []string{"dpkg-deb", "dpkg", "dpkg-query", "make", "objdump"} {
		if _, err := exec.LookPath(b); err != nil {
			testenv.Skip(t, "dpkg", "%s not found (Debian packages dpkg, make, binutils): %v", b, err)
		}
	}
	if os.Geteuid() != 0 {
		testenv.Skip(t, "root", "dpkg --root installs files owned by root; not running as root")
	}
	// dpkg --root still logs to the host's log unless told otherwise:
	// every dpkg call here names a log inside its scratch root.
	hostLog := func() int {
		b, _ := os.ReadFile("/var/log/dpkg.log")
		return strings.Count(string(b), " weft:")
	}
	logged := hostLog()
	bin := binDir(t)
	tmp := t.TempDir()
	ver := version(t)
	arch := strings.TrimSpace(run(t, "dpkg", "--print-architecture"))

	gobin := proctest.GoTool()
	r := proctest.Run(t, 5*time.Minute, nil, "", "make", "-C", proctest.RepoRoot(t), "deb", "BIN="+filepath.Join(tmp, "out"), "GO="+gobin)
	deb := filepath.Join(tmp, "out", fmt.Sprintf("weft_%s_%s.deb", ver, arch))
	if r.Code != 0 || !strings.Contains(r.Stdout, deb) {
		t.Fatalf("make deb: exit %d, want %s\n%s%s", r.Code, deb, r.Stdout, r.Stderr)
	}
	t.Logf("make deb: %v", r.Took)

	// Control fields.
	control := map[string]string{}
	for _, l := range strings.Split(run(t, "dpkg-deb", "-f", deb), "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok && !strings.HasPrefix(l, " ") {
			control[k] = v
		}
	}
	for k, want := range map[string]string{"Package": "weft", "Version": ver, "Architecture": arch} {
		if control[k] != want {
			t.Errorf("control %s = %q, want %q", k, control[k], want)
		}
	}
	deps := map[string]string{} // name -> constraint
	for _, d := range strings.Split(control["Depends"], ",") {
		name, cons, _ := strings.Cut(strings.TrimSpace(d), " ")
		deps[name] = cons
	}
	for _, need := range []string{"libc6", "libfabric1", "libfabric-dev", "gcc", "pkg-config"} {
		if _, ok := deps[need]; !ok {
			t.Errorf("Depends %q lacks %s", control["Depends"], need)
		}
	}
	if !strings.Contains(run(t, "dpkg-deb", "-I", deb), "md5sums") {
		t.Errorf("no md5sums in the control archive")
	}

	// File list: paths, owners, modes.
	want := map[string]string{
		"./usr/bin/fabrun":                                          "-rwxr-xr-x",
		"./usr/bin/fabrun-info":                                     "-rwxr-xr-x",
		"./usr/share/modules/modulefiles/weft/" + ver:               "-rw-r--r--",
		"./usr/share/doc/weft/copyright":                            "-rw-r--r--",
		"./usr/share/doc/weft/changelog.Debian.gz":                  "-rw-r--r--",
		"./usr/share/doc/weft/README.md.gz":                         "-rw-r--r--",
		"./usr/share/doc/weft/deploy.md.gz":                         "-rw-r--r--",
		"./usr/share/doc/weft/examples/slurm/weft-endpoints.sbatch": "-rw-r--r--",
	}
	for _, l := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", deb)), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c line %q", l)
		}
		mode, owner, path := f[0], f[1], f[len(f)-1]
		if owner != "root/root" {
			t.Errorf("%s owned by %s", path, owner)
		}
		if strings.HasPrefix(mode, "d") && mode != "drwxr-xr-x" {
			t.Errorf("directory %s has mode %s", path, mode)
		}
		if w, ok := want[path]; ok {
			if mode != w {
				t.Errorf("%s has mode %s, want %s", path, mode, w)
			}
			delete(want, path)
		}
	}
	for p := range want {
		t.Errorf("package lacks %s", p)
	}

	// A scratch root without the dependencies refuses the package, naming
	// them.
	bare := scratchRoot(t, filepath.Join(tmp, "bare"), nil)
	r = proctest.Run(t, time.Minute, nil, "", "dpkg", "--root="+bare, "--log="+filepath.Join(bare, "dpkg.log"), "-i", deb)
	if r.Code == 0 || !strings.Contains(r.Stderr, "weft depends on libfabric-dev") {
		t.Errorf("dpkg -i without the dependencies: exit %d\n%s", r.Code, r.Stderr)
	}

	// A scratch root with this machine's dependency packages installs it.
	names := make([]string, 0, len(deps))
	for n := range deps {
		names = append(names, n)
	}
	root := scratchRoot(t, filepath.Join(tmp, "root"), names)
	r = proctest.Run(t, time.Minute, nil, "", "dpkg", "--root="+root, "--log="+filepath.Join(root, "dpkg.log"), "-i", deb)
	if r.Code != 0 || strings.Contains(r.Stderr, "warning") {
		t.Fatalf("dpkg --root -i: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("dpkg --root -i: %v", r.Took)
	if s := run(t, "dpkg-query", "--root="+root, "-W", "-f=${Status} ${Version}", "weft"); s != "install ok installed "+ver {
		t.Errorf("scratch root: weft status %q", s)
	}

	// The installed fabrun runs a job, and finds the installed fabrun-info.
	fab := filepath.Join(root, "usr", "bin", "fabrun")
	r = proctest.Run(t, time.Minute, nil, "", fab, "-n", "2", "--provider", "shm", "--tag-output", filepath.Join(bin, "hello"))
	if r.Code != 0 || strings.Count(r.Stdout, ": ring ok") != 2 {
		t.Errorf("installed fabrun -n 2 hello: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("installed fabrun -n 2 hello: %v", r.Took)
	r = proctest.Run(t, time.Minute, nil, "", fab, "info", "--provider", "shm")
	if r.Code != 0 || !strings.Contains(r.Stdout, "shm") {
		t.Errorf("installed fabrun info: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// The installed modulefile finds the installed fabrun.
	if _, err := os.Stat("/usr/share/modules/init/bash"); err == nil {
		home, _ := os.UserHomeDir()
		r = proctest.Run(t, 30*time.Second, nil, "", "env", "-i", "HOME="+home, "TERM=dumb", "ROOT="+root, "bash", "-l", "-c",
			`module use "$ROOT/usr/share/modules/modulefiles" && module load weft && command -v fabrun`)
		if got := strings.TrimSpace(r.Stdout); r.Code != 0 || got != fab {
			t.Errorf("installed modulefile: fabrun %q, want %s (exit %d)\n%s", got, fab, r.Code, r.Stderr)
		}
	}

	// Purge leaves none of the package's files.
	r = proctest.Run(t, time.Minute, nil, "", "dpkg", "--root="+root, "--log="+filepath.Join(root, "dpkg.log"), "-P", "weft")
	if r.Code != 0 {
		t.Errorf("dpkg --root -P weft: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, p := range []string{"usr/bin/fabrun", "usr/bin/fabrun-info", "usr/share/modules/modulefiles/weft", "usr/share/doc/weft"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s left after purge", p)
		}
	}
	if out, _ := exec.Command("dpkg-query", "-W", "-f=${Status}", "weft").Output(); strings.Contains(string(out), "installed") {
		t.Errorf("this machine's dpkg database lists weft: %q", out)
	}
	if n := hostLog(); n != logged {
		t.Errorf("/var/log/dpkg.log gained %d lines about weft", n-logged)
	}

	t.Run("lintian", func(t *testing.T) {
		if _, err := exec.LookPath("lintian"); err != nil {
			testenv.Skip(t, "lintian", "lintian not installed (Debian package lintian): %v", err)
		}
		r := proctest.Run(t, 2*time.Minute, nil, "", "lintian", "--no-tag-display-limit", deb)
		if errs := regexp.MustCompile(`(?m)^E: .*$`).FindAllString(r.Stdout, -1); len(errs) > 0 {
			t.Errorf("lintian errors:\n%s", strings.Join(errs, "\n"))
		}
		t.Logf("lintian:\n%s", r.Stdout)
	})
}

// scratchRoot makes dir a root for dpkg --root whose database holds the
// named packages as this machine has them installed (their status stanzas,
// with empty file lists).
func scratchRoot(t *testing.T, dir string, pkgs []string) string {
	t.Helper()
	admin := filepath.Join(dir, "var", "lib", "dpkg")
	for _, d := range []string{"info", "updates"} {
		must(t, os.MkdirAll(filepath.Join(admin, d), 0o755))
	}
	var status strings.Builder
	for _, p := range pkgs {
		out, err := exec.Command("dpkg-query", "-s", p).Output()
		if err != nil {
			t.Fatalf("dependency %s is not installed here (deploy/install-deps.sh build installs it): %v", p, err)
		}
		status.Write(out)
		status.WriteString("\n")
		full := run(t, "dpkg-query", "-W", "-f=${binary:Package}", p)
		must(t, os.WriteFile(filepath.Join(admin, "info", full+".list"), nil, 0o644))
	}
	must(t, os.WriteFile(filepath.Join(admin, "status"), []byte(status.String()), 0o644))
	must(t, os.WriteFile(filepath.Join(admin, "available"), nil, 0o644))
	return dir
}

// run runs a short command and returns its standard output; failure fails
// the test.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	r := proctest.Run(t, 30*time.Second, nil, "", name, args...)
	if r.Code != 0 {
		t.Fatalf("%s %v: exit %d\n%s%s", name, args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}
