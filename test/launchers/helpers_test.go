package launchers_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds fabrun and examples/hello once per test run.
func binaries(t *testing.T) (fabrun, hello string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "weft-launchers-")
		if buildErr != nil {
			return
		}
		os.Chmod(binDir, 0o755)
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		cmd := exec.Command(gobin, "build", "-o", binDir+"/", "github.com/weft-hpc/weft/cmd/fabrun", "github.com/weft-hpc/weft/examples/hello")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "fabrun"), filepath.Join(binDir, "hello")
}

type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// run runs a command with a deadline and extra environment.
func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.WaitDelay = 3 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		t.Fatalf("%s %v: no exit within %v\n%s%s", name, args, timeout, r.stdout, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return r
}

// checkRing checks that n ranks printed their ring line.
func checkRing(t *testing.T, what string, r result, n int) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", what, r.code, r.stdout, r.stderr)
	}
	for rank := range n {
		if want := fmt.Sprintf("rank %d of %d on ", rank, n); !strings.Contains(r.stdout, want) {
			t.Errorf("%s: no %q...ring ok line in:\n%s%s", what, want, r.stdout, r.stderr)
		}
	}
	if c := strings.Count(r.stdout, ": ring ok"); c != n {
		t.Errorf("%s: %d ring ok lines, want %d:\n%s", what, c, n, r.stdout)
	}
}

func marker() string {
	var b [8]byte
	rand.Read(b[:])
	return "WEFT_TEST_MARK=" + hex.EncodeToString(b[:])
}

// marked lists live processes whose environment contains mark.
func marked(mark string) []string {
	var left []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte(mark)) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if !strings.Contains(string(stat), ") Z ") {
			left = append(left, strings.TrimSpace(string(stat)))
		}
	}
	return left
}

// waitGone waits up to d for marked processes to disappear.
func waitGone(mark string, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		left := marked(mark)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePorts returns n distinct TCP ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// repoRoot finds the module root (for deploy/ scripts).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}
