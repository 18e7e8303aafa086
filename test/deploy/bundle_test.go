package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBundleLibfabric: deploy/bundle-libfabric.sh (make gpu-tests) copies
// libfabric.so.1 and every library it needs but the C library's own into
// its directory, so that with LD_LIBRARY_PATH there the dynamic loader
// finds each of them in the bundle.
func TestBundleLibfabric(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command(deployFile(t, "bundle-libfabric.sh"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("bundle-libfabric.sh: %v\n%s", err, out)
	}
	lib := filepath.Join(dir, "libfabric.so.1")
	if _, err := os.Stat(lib); err != nil {
		t.Fatal(err)
	}
	ldd := exec.Command("ldd", lib)
	ldd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	deps, err := ldd.Output()
	if err != nil {
		t.Fatalf("ldd: %v", err)
	}
	n := 0
	for _, line := range strings.Split(string(deps), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "=>" {
			continue
		}
		switch name := f[0]; {
		case strings.HasPrefix(name, "libc.so"), strings.HasPrefix(name, "libm.so"), strings.HasPrefix(name, "ld-linux"):
		default:
			if filepath.Dir(f[2]) != dir {
				t.Errorf("%s resolves to %s, not into the bundle", name, f[2])
			}
			n++
		}
	}
	t.Logf("%d libraries besides libfabric resolve into the bundle", n)
}
