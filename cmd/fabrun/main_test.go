package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds fabrun and examples/hello once per test run.
func binaries(t testing.TB) (fabrun, hello string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "fabrun-test-")
		if buildErr != nil {
			return
		}
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		cmd := exec.Command(gobin, "build", "-o", binDir+"/", "github.com/weft-hpc/weft/cmd/fabrun",
			"github.com/weft-hpc/weft/cmd/fabrun/fabrun-info", "github.com/weft-hpc/weft/examples/hello")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "fabrun"), filepath.Join(binDir, "hello")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// runFabrun runs the fabrun binary with args and extra environment.
func runFabrun(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	fab, _ := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, fab, args...)
	// Local ranks even when the tests run inside a Slurm allocation.
	cmd.Env = append(append(os.Environ(), "WEFT_LAUNCHER=local"), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("fabrun %v: %v", args, err)
	}
	return r
}

func marker(t *testing.T) string {
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

func TestHelloShm(t *testing.T) {
	_, hello := binaries(t)
	host, _ := os.Hostname()
	r := runFabrun(t, nil, "", "-n", "4", "--provider", "shm", "--tag-output", hello)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for rank := range 4 {
		want := fmt.Sprintf("[%d] rank %d of 4 on %s: ring ok\n", rank, rank, host)
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in:\n%s", want, r.stdout)
		}
	}
}

func TestHelloTCP(t *testing.T) {
	_, hello := binaries(t)
	r := runFabrun(t, nil, "", "-n", "3", "--provider", "tcp;ofi_rxm", hello)
	if r.code != 0 || strings.Count(r.stdout, "ring ok") != 3 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestFailFast is the acceptance check: rank 1 exits 3, the others
// are killed at once, fabrun exits 3 within ~2 s and no sleep survives.
func TestFailFast(t *testing.T) {
	mark := marker(t)
	r := runFabrun(t, nil, "", "-n", "3", "--env", mark, "sh", "-c", `[ "$PMI_RANK" = 1 ] && exit 3; sleep 30`)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "fabrun: rank 1 exited with status 3") {
		t.Errorf("stderr does not name the rank:\n%s", r.stderr)
	}
	if r.took > 3*time.Second {
		t.Errorf("took %v", r.took)
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func TestTimeoutFlagAndEnv(t *testing.T) {
	mark := marker(t)
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"-n", "2", "--timeout", "400ms", "--env", mark, "sleep", "30"}},
		{[]string{"WEFT_TIMEOUT=400ms", "WEFT_NP=2", mark}, []string{"sleep", "30"}},
	} {
		r := runFabrun(t, c.env, "", c.args...)
		if r.code != 124 || !strings.Contains(r.stderr, "timed out after 400ms") {
			t.Errorf("%v %v: exit %d\n%s", c.env, c.args, r.code, r.stderr)
		}
		if r.took > 3*time.Second {
			t.Errorf("took %v", r.took)
		}
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		code int
		msg  string
	}{
		{nil, []string{"--no-such-flag", "-n", "2", "true"}, 2, "flag provided but not defined: -no-such-flag"},
		{nil, []string{"-n", "0", "true"}, 2, "number of ranks must be positive"},
		{nil, []string{"-n", "-3", "true"}, 2, "number of ranks must be positive"},
		{nil, []string{"-n", "2"}, 2, "no program given"},
		{nil, []string{"-n", "2", "/no/such/program"}, 127, `program "/no/such/program"`},
		{nil, []string{"-n", "2", "no-such-program-weft"}, 127, "executable file not found"},
		{nil, []string{"-n", "2", "--launcher", "pbs", "true"}, 2, `unknown launcher "pbs"`},
		{nil, []string{"-n", "2", "--env", "NOEQ", "true"}, 2, `"NOEQ" is not KEY=VALUE`},
		{nil, []string{"-n", "2", "--hosts", "a:0", "true"}, 2, "slots must be a positive integer"},
		{nil, []string{"-n", "2", "--hostfile", "/no/such/file", "true"}, 2, "no such file"},
		{[]string{"WEFT_TIMEOUT=soon"}, []string{"-n", "2", "true"}, 2, `WEFT_TIMEOUT="soon" is not a duration`},
		{[]string{"WEFT_NP=x"}, []string{"true"}, 2, `WEFT_NP="x" is not an integer`},
	} {
		r := runFabrun(t, c.env, "", c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("fabrun %v (env %v): exit %d, want %d with %q; stderr:\n%s", c.args, c.env, r.code, c.code, c.msg, r.stderr)
		}
	}
}

func TestEnvDefaultsAndHostfile(t *testing.T) {
	r := runFabrun(t, []string{"WEFT_NP=3", "WEFT_TAG_OUTPUT=1", "WEFT_PROVIDER=sockets"}, "", "sh", "-c", `echo "$PMI_RANK $WEFT_PROVIDER"`)
	for rank := range 3 {
		if want := fmt.Sprintf("[%d] %d sockets\n", rank, rank); !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	hf := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hf, []byte("# two slots here\nlocalhost slots=2\n"), 0o644)
	r = runFabrun(t, nil, "", "--hostfile", hf, "sh", "-c", `echo "$PMI_RANK/$PMI_SIZE local $WEFT_LOCAL_RANK/$WEFT_LOCAL_SIZE"`)
	if r.code != 0 || !strings.Contains(r.stdout, "1/2 local 1/2") || !strings.Contains(r.stdout, "0/2 local 0/2") {
		t.Errorf("hostfile job: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestStdinToRankZero(t *testing.T) {
	r := runFabrun(t, nil, "ping\n", "-n", "2", "--tag-output", "sh", "-c", `read -r l; echo "got [$l]"`)
	if r.code != 0 || !strings.Contains(r.stdout, "[0] got [ping]") || !strings.Contains(r.stdout, "[1] got []") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestSignalForwarded(t *testing.T) {
	fab, _ := binaries(t)
	mark := marker(t)
	cmd := exec.Command(fab, "-n", "3", "--launcher", "local", "--tag-output", "sh", "-c", `echo up; sleep 30`)
	cmd.Env = append(os.Environ(), mark)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.Now().Add(10 * time.Second)
	for len(marked(mark)) < 7 && time.Now().Before(deadline) { // fabrun + 3 sh + 3 sleep
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("fabrun after SIGTERM: %v\n%s", err, se.String())
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v", took)
	}
	if !strings.Contains(se.String(), "killed by signal 15") {
		t.Errorf("stderr:\n%s", se.String())
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func TestInfo(t *testing.T) {
	r := runFabrun(t, nil, "", "info")
	if r.code != 0 || !strings.Contains(r.stdout, "libfabric providers") || !strings.Contains(r.stdout, "RDMA devices") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "  shm (") {
		t.Errorf("shm not listed:\n%s", r.stdout)
	}
	r = runFabrun(t, nil, "", "info", "--provider", "no-such-provider")
	if r.code == 0 || !strings.Contains(r.stderr, "fabrun info:") {
		t.Errorf("unknown provider: exit %d\n%s", r.code, r.stderr)
	}
	r = runFabrun(t, []string{"WEFT_FABRUN_INFO=/no/such/fabrun-info"}, "", "info")
	if r.code == 0 || !strings.Contains(r.stderr, "fabrun info:") {
		t.Errorf("missing fabrun-info: exit %d\n%s", r.code, r.stderr)
	}
}
