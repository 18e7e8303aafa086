package mpijob

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRotate(t *testing.T) {
	s := []string{"a", "b", "c"}
	for k, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := Rotate(s, k); !slices.Equal(got, want) {
			t.Errorf("Rotate(%v, %d) = %v, want %v", s, k, got, want)
		}
	}
	if !slices.Equal(s, []string{"a", "b", "c"}) {
		t.Errorf("Rotate changed its argument: %v", s)
	}
	if Rotate([]int(nil), 3) != nil {
		t.Error("Rotate of nothing is not empty")
	}
}

// TestRun: a job's output comes back; a failing job's error carries its
// output; a job that outlives its limit is killed with its whole process
// group (a child it started in the background included) and the error
// says so.
func TestRun(t *testing.T) {
	ctx := context.Background()
	out, err := Run(ctx, 10*time.Second, []string{"sh", "-c", "echo out; echo err >&2"})
	if err != nil || !strings.Contains(string(out), "out") || !strings.Contains(string(out), "err") {
		t.Errorf("output %q, %v", out, err)
	}
	if _, err := Run(ctx, 10*time.Second, []string{"sh", "-c", "echo oops; exit 3"}); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("failing job: %v", err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	_, err = Run(ctx, 200*time.Millisecond, []string{"sh", "-c", "sleep 30 & echo $! > " + pidFile + "; wait"})
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("overlong job: %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("overlong job ended after %v", el)
	}
	pid, _ := os.ReadFile(pidFile)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strings.TrimSpace(string(pid))); err != nil || len(pid) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("background child %s of a killed job still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := Run(ctx, time.Second, nil); err == nil {
		t.Error("empty command line accepted")
	}
}

func TestFindAndLaunch(t *testing.T) {
	if _, err := Find(context.Background(), "lam"); err == nil || !strings.Contains(err.Error(), "lam") {
		t.Errorf("Find(lam): %v", err)
	}
	got := FabrunLaunch("/x/fabrun", 2, "shm", time.Minute, []string{"A=1"})
	want := []string{"/x/fabrun", "-n", "2", "--launcher", "local", "--provider", "shm", "--timeout", "1m0s", "--env", "A=1"}
	if !slices.Equal(got, want) {
		t.Errorf("FabrunLaunch = %v, want %v", got, want)
	}
	if _, err := Fabrun(context.Background(), filepath.Join(t.TempDir(), "none"), ""); err == nil {
		t.Error("a missing fabrun accepted")
	}
}
