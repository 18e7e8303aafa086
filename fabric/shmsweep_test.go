package fabric

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestShmRegionPID(t *testing.T) {
	for _, c := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"1234:0:0", 1234, true},
		{"99:3:17", 99, true},
		{"1234:0", 0, false},
		{"1234:0:0:0", 0, false},
		{"abc:0:0", 0, false},
		{"0:0:0", 0, false},
		{"+5:0:0", 0, false},
		{"12:-1:0", 0, false},
		{"12::0", 0, false},
		{"sem.foo", 0, false},
	} {
		pid, ok := shmRegionPID(c.name)
		if pid != c.pid || ok != c.ok {
			t.Errorf("shmRegionPID(%q) = %d, %v; want %d, %v", c.name, pid, ok, c.pid, c.ok)
		}
	}
}

// TestRemoveStaleShm creates region-named files for a dead process, a live
// one and this process, plus an unrelated file, and checks that only the
// dead process's and this process's regions are removed.
func TestRemoveStaleShm(t *testing.T) {
	dir := t.TempDir()
	// A pid that is certainly dead: a child that has exited and been reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("run true: %v", err)
	}
	dead := cmd.Process.Pid
	live := os.Getppid()
	self := os.Getpid()
	files := map[string]bool{ // name -> should survive
		strconv.Itoa(dead) + ":0:0": false,
		strconv.Itoa(dead) + ":0:1": false,
		strconv.Itoa(self) + ":0:0": false,
		strconv.Itoa(live) + ":0:0": true,
		"sem.other":                 true,
		"1:2":                       true,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := removeStaleShm(dir, self); got != 3 {
		t.Errorf("removed %d regions, want 3", got)
	}
	for name, survive := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if exists := err == nil; exists != survive {
			t.Errorf("%s: exists = %v, want %v", name, exists, survive)
		}
	}
	if got := removeStaleShm(filepath.Join(dir, "missing"), self); got != 0 {
		t.Errorf("missing dir: removed %d", got)
	}
}
