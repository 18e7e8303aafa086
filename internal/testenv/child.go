package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// childEnv marks a test binary run by InChild.
const childEnv = "WEFT_TEST_CHILD"

// InChild lets a test that changes process-wide settings (a default mode,
// a registered compiler) run its body in a child process, so the parallel
// tests of the parent see nothing of it. In the test process it runs the
// binary again with only the test name (in parallel with other tests),
// checks that the child passed and returns false; in the child it returns
// true and the caller goes on.
func InChild(t *testing.T, name string) bool {
	t.Helper()
	if os.Getenv(childEnv) == name {
		return true
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+name)) {
		t.Fatalf("child running %s: %v\n%s", name, err, out)
	}
	return false
}
