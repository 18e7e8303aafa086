package nodeseg

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/weft-hpc/weft/errs"
)

func TestCreateOpenUnlink(t *testing.T) {
	t.Setenv("WEFT_SHM_DIR", t.TempDir())
	s, err := Create("test", 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Name(), "weft-test-") {
		t.Fatalf("name %q", s.Name())
	}
	if pid, _, ok := owner(s.Name()); !ok || pid != os.Getpid() || !Owned(s.Name(), os.Getpid()) {
		t.Fatalf("owner of %q: %d %v", s.Name(), pid, ok)
	}
	s.Bytes()[100] = 42
	o, err := Open(s.Name(), 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.Bytes()[100] != 42 {
		t.Fatal("second mapping does not see the first one's store")
	}
	if _, err := Open(s.Name(), 1<<20); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("open larger than the file: %v", err)
	}
	if err := s.Unlink(); err != nil || s.Linked() {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(Dir(), s.Name())); !os.IsNotExist(err) {
		t.Fatalf("file still there: %v", err)
	}
	o.Bytes()[101] = 7 // mappings outlive the name
	if s.Bytes()[101] != 7 {
		t.Fatal("mapping lost after unlink")
	}
	if err := s.Unlink(); err != nil {
		t.Fatal("second unlink:", err)
	}
}

func TestBadArguments(t *testing.T) {
	t.Setenv("WEFT_SHM_DIR", t.TempDir())
	for _, k := range []string{"", "a-b", "a/b"} {
		if _, err := Create(k, 4096); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("kind %q: %v", k, err)
		}
	}
	if _, err := Create("x", 0); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("size 0: %v", err)
	}
	for _, n := range []string{"", "../etc/passwd", "other", "weft-x/../y"} {
		if _, err := Open(n, 4096); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("open %q: %v", n, err)
		}
	}
	var nilSeg *Seg
	if nilSeg.Unlink() != nil || nilSeg.Close() != nil || nilSeg.Linked() {
		t.Error("nil segment")
	}
}

// TestSweep: a segment whose creator died is removed, one of a live
// process (this one) and files that are not segments stay.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WEFT_SHM_DIR", dir)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid // exited and reaped
	mine, err := Create("test", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	start, err := startTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{ // name → expected to stay
		"weft-ep-" + itoa(dead) + "-123-abcd":                         false,
		"weft-win-" + itoa(os.Getpid()) + "-" + utoa(start+1) + "-ab": false, // pid reused by a later process
		mine.Name():        true,
		"weft-odd-name":    true,
		"17:0:1":           true, // libfabric's own
		"weft-ep-x-1-abcd": true,
	}
	for n := range files {
		if n != mine.Name() {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := Sweep()
	if err != nil || got != 2 {
		t.Fatalf("Sweep removed %d, err %v; want 2", got, err)
	}
	for n, stay := range files {
		_, err := os.Stat(filepath.Join(dir, n))
		if (err == nil) != stay {
			t.Errorf("%s: stat err %v, want kept=%v", n, err, stay)
		}
	}
}

func TestNodeKeyOverride(t *testing.T) {
	if NodeKey() != MachineKey() && os.Getenv("WEFT_NODE_ID") == "" {
		t.Fatal("node key differs from the machine key without WEFT_NODE_ID")
	}
	t.Setenv("WEFT_NODE_ID", "pretend-node-7")
	if NodeKey() != "pretend-node-7" || MachineKey() == "pretend-node-7" {
		t.Fatalf("override: node %q machine %q", NodeKey(), MachineKey())
	}
}

func itoa(n int) string    { return strconv.Itoa(n) }
func utoa(n uint64) string { return strconv.FormatUint(n, 10) }
