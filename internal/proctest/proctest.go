// Package proctest holds helpers for tests that start real processes:
// building the project's commands once per test binary, running a command
// under a deadline, and finding the processes a test left behind.
//
// It is imported only by tests.
package proctest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Builder builds a fixed list of packages into one temporary directory, once,
// the first time a test asks for a binary. Close removes the directory; call
// it from TestMain.
type Builder struct {
	pkgs []string
	once sync.Once
	dir  string
	err  error
}

// NewBuilder returns a Builder for the given import paths.
func NewBuilder(pkgs ...string) *Builder { return &Builder{pkgs: pkgs} }

// GoTool returns the path of the go command for the tests to run: the one
// in $GOROOT where that is set, else the first go on $PATH.
func GoTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("go"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return "go"
}

// Path builds every package (first call only) and returns the path of the
// binary named name (the last element of its import path). It fails the test
// when the build failed.
func (b *Builder) Path(tb testing.TB, name string) string {
	tb.Helper()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "weft-bin-")
		if b.err != nil {
			return
		}
		// Other users (an sshd, slurmd) may run these binaries.
		os.Chmod(b.dir, 0o755)
		cmd := exec.Command(GoTool(), append([]string{"build", "-o", b.dir + "/"}, b.pkgs...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	for _, p := range b.pkgs {
		if path.Base(p) == name {
			return filepath.Join(b.dir, name)
		}
	}
	tb.Fatalf("proctest: %s is not among the built packages %v", name, b.pkgs)
	return ""
}

// Close removes the build directory.
func (b *Builder) Close() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// Result is what a finished command left.
type Result struct {
	Code           int // exit status (0 on success)
	Stdout, Stderr string
	Took           time.Duration
}

// Run runs name with args, the test's environment plus env, and stdin,
// killing it after timeout; a command that does not exit in time, or cannot
// start, fails the test.
func Run(tb testing.TB, timeout time.Duration, env []string, stdin string, name string, args ...string) Result {
	tb.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	return RunCmd(tb, timeout, cmd)
}

// RunCmd runs cmd as Run does (its output captured, killed after timeout,
// failing the test when it cannot start or does not exit in time), for a
// command its caller set up (another working directory, a wrapper such
// as nsenter).
func RunCmd(tb testing.TB, timeout time.Duration, cmd *exec.Cmd) Result {
	tb.Helper()
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("%s: %v", cmd, err)
	}
	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() { timedOut.Store(true); cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	r := Result{Stdout: so.String(), Stderr: se.String(), Took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case timedOut.Load():
		tb.Fatalf("%s: no exit within %v\n%s%s", cmd, timeout, r.Stdout, r.Stderr)
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		tb.Fatalf("%s: %v", cmd, err)
	}
	return r
}

// Marker returns a fresh NAME=VALUE environment entry. Processes started with
// it in their environment (and their children) can be found by Marked.
func Marker() string {
	var b [8]byte
	rand.Read(b[:])
	return "WEFT_TEST_MARK=" + hex.EncodeToString(b[:])
}

// Marked lists the live (not zombie) processes whose environment contains
// mark, as their /proc stat lines.
func Marked(mark string) []string {
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

// WaitGone waits up to d for the processes carrying mark to exit and returns
// those still alive.
func WaitGone(mark string, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		left := Marked(mark)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Buffer is a bytes.Buffer that several goroutines may write at once (a
// job's ranks writing one output sink).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Recorder is a reporter (Helper, Errorf, Logf) that keeps what it is told,
// for tests of test helpers that report through such an interface. It is
// safe for concurrent use; read Errors and Logs once the reporting is over.
type Recorder struct {
	mu     sync.Mutex
	Errors []string
	Logs   []string
}

// Helper does nothing; it makes Recorder look like a testing.TB.
func (r *Recorder) Helper() {}

// Errorf records a formatted error.
func (r *Recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
}

// Logf records a formatted log line.
func (r *Recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Logs = append(r.Logs, fmt.Sprintf(format, args...))
}

// SecretExposed lists the /proc files (command lines, environments) that
// hold secret and that users other than the owner may read; seen counts the
// owner-only ones that hold it (a rank's own environment).
func SecretExposed(secret string) (leaks []string, seen int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			path := filepath.Join("/proc", e.Name(), f)
			b, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(b), secret) {
				continue
			}
			if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o044 != 0 {
				leaks = append(leaks, path+": "+strings.ReplaceAll(string(b), "\x00", " "))
			} else {
				seen++
			}
		}
	}
	return leaks, seen
}

// RanksWithout returns the ranks below np for which out has no line tagged
// "[rank] " that contains frame (a function of a goroutine stack dump,
// e.g. ".hangHere(").
func RanksWithout(out, frame string, np int) []int {
	var missing []int
	lines := strings.Split(out, "\n")
	for r := range np {
		tag, found := fmt.Sprintf("[%d] ", r), false
		for _, l := range lines {
			if strings.HasPrefix(l, tag) && strings.Contains(l, frame) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, r)
		}
	}
	return missing
}
