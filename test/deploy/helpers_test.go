package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-hpc/weft/internal/proctest"
)

var bins = proctest.NewBuilder(
	"github.com/weft-hpc/weft/cmd/fabrun",
	"github.com/weft-hpc/weft/cmd/fabrun/fabrun-info",
	"github.com/weft-hpc/weft/examples/hello",
	"github.com/weft-hpc/weft/examples/endpoints",
)

func TestMain(m *testing.M) {
	code := m.Run()
	bins.Close()
	os.Exit(code)
}

// binDir builds fabrun, fabrun-info, hello and endpoints once per test run
// and returns the directory that holds them.
func binDir(t *testing.T) string {
	t.Helper()
	return filepath.Dir(bins.Path(t, "fabrun"))
}

// deployFile returns the path of a file under deploy/.
func deployFile(t *testing.T, rel string) string {
	t.Helper()
	return filepath.Join(proctest.RepoRoot(t), "deploy", rel)
}

// version is the release deploy/VERSION names.
func version(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(deployFile(t, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// installPrefix installs fabrun, fabrun-info and the modulefile into a
// scratch prefix laid out as docs/deploy.md says (PREFIX/bin,
// PREFIX/share/modules/modulefiles/weft/VERSION) and returns PREFIX.
func installPrefix(t *testing.T) string {
	t.Helper()
	bin := binDir(t)
	prefix := filepath.Join(t.TempDir(), "prefix")
	modDir := filepath.Join(prefix, "share", "modules", "modulefiles", "weft")
	for _, d := range []string{filepath.Join(prefix, "bin"), modDir} {
		must(t, os.MkdirAll(d, 0o755))
	}
	copyFile(t, filepath.Join(bin, "fabrun"), filepath.Join(prefix, "bin", "fabrun"), 0o755)
	copyFile(t, filepath.Join(bin, "fabrun-info"), filepath.Join(prefix, "bin", "fabrun-info"), 0o755)
	copyFile(t, deployFile(t, "modules/weft/"+version(t)), filepath.Join(modDir, version(t)), 0o644)
	return prefix
}

// pathWith returns a PATH environment entry with dir first.
func pathWith(dir string) string {
	return "PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")
}
