// Package nodeseg creates, maps and removes the shared-memory files that
// ranks of one node share: onesided's direct-store windows and endpoint's
// node transport rings. It also says which ranks share a node (NodeKey).
//
// A segment is a file in Dir (WEFT_SHM_DIR, default /dev/shm) named
//
//	weft-<kind>-<pid>-<start>-<random>
//
// where pid and start identify the creating process (its start time in
// clock ticks since boot defeats pid reuse). The creator unlinks the file
// once every peer has mapped it, so a running job normally has none in
// Dir; the mappings stay valid. A process that dies before that leaves its
// file behind: Sweep, run once by every process that creates a segment
// and by fabrun when a job ends, removes the files whose creator no longer
// runs.
package nodeseg

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/settings"
)

// prefix starts the name of every segment file.
const prefix = "weft-"

// Seg is one mapped shared-memory file.
type Seg struct {
	path string // "" once unlinked
	name string
	mem  []byte
}

// Dir returns the directory of node-shared files (WEFT_SHM_DIR).
func Dir() string {
	d, _, _ := settings.Str("WEFT_SHM_DIR")
	if d == "" {
		d = "/dev/shm"
	}
	return d
}

// NodeKey identifies the node this process runs on: the host name plus the
// kernel boot id, so that two containers sharing a host name but not
// memory are told apart. WEFT_NODE_ID overrides it (tests use it to make
// ranks of one machine behave as ranks of different nodes).
func NodeKey() string {
	if v, _, _ := settings.Str("WEFT_NODE_ID"); v != "" {
		return v
	}
	return MachineKey()
}

// MachineKey identifies the machine itself (host name and boot id),
// whatever WEFT_NODE_ID says: ranks on one machine share its cores.
func MachineKey() string {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return host + "/" + string(bytes.TrimSpace(boot))
}

// self is this process's pid and start time, as segment names carry them.
var self = sync.OnceValue(func() string {
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		start = 0
	}
	return strconv.Itoa(pid) + "-" + strconv.FormatUint(start, 10)
})

// startTime reads field 22 of /proc/<pid>/stat.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')') // the command may hold spaces
	if i < 0 {
		return 0, fmt.Errorf("nodeseg: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("nodeseg: short /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Create creates and maps a new segment of size bytes (zeroed) whose name
// starts with weft-<kind>-. kind must be a short word without '-' or '/'.
func Create(kind string, size int) (*Seg, error) {
	if kind == "" || strings.ContainsAny(kind, "-/") {
		return nil, fmt.Errorf("nodeseg: segment kind %q: %w", kind, errs.ErrInvalid)
	}
	sweepOnce()
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("nodeseg: random segment name: %w", err)
	}
	name := prefix + kind + "-" + self() + "-" + hex.EncodeToString(b[:])
	return mapFile(name, size, true)
}

// Open maps an existing segment of at least size bytes created by Create
// (in this process or another one of the node).
func Open(name string, size int) (*Seg, error) {
	if !strings.HasPrefix(name, prefix) || strings.ContainsRune(name, '/') {
		return nil, fmt.Errorf("nodeseg: bad segment name %q: %w", name, errs.ErrInvalid)
	}
	return mapFile(name, size, false)
}

func mapFile(name string, size int, create bool) (*Seg, error) {
	if size <= 0 {
		return nil, fmt.Errorf("nodeseg: segment of %d bytes: %w", size, errs.ErrInvalid)
	}
	path := filepath.Join(Dir(), name)
	flags := syscall.O_RDWR | syscall.O_CLOEXEC
	if create {
		flags |= syscall.O_CREAT | syscall.O_EXCL
	}
	fd, err := syscall.Open(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("nodeseg: open %s: %w", path, err)
	}
	defer syscall.Close(fd)
	if create {
		if err := syscall.Ftruncate(fd, int64(size)); err != nil {
			_ = syscall.Unlink(path)
			return nil, fmt.Errorf("nodeseg: size %s to %d bytes: %w", path, size, err)
		}
	} else {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, fmt.Errorf("nodeseg: stat %s: %w", path, err)
		}
		if st.Size < int64(size) {
			return nil, fmt.Errorf("nodeseg: %s has %d bytes, want %d: %w", path, st.Size, size, errs.ErrInvalid)
		}
	}
	mem, err := syscall.Mmap(fd, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		if create {
			_ = syscall.Unlink(path)
		}
		return nil, fmt.Errorf("nodeseg: mmap %s (%d bytes): %w", path, size, err)
	}
	return &Seg{path: path, name: name, mem: mem}, nil
}

// Name returns the segment's file name (without the directory), for peers
// to Open.
func (s *Seg) Name() string { return s.name }

// Bytes returns the mapping (nil once closed).
func (s *Seg) Bytes() []byte { return s.mem }

// Linked reports whether the file still exists (Unlink not called yet).
func (s *Seg) Linked() bool { return s != nil && s.path != "" }

// Unlink removes the file; mappings stay valid. Idempotent.
func (s *Seg) Unlink() error {
	if s == nil || s.path == "" {
		return nil
	}
	err := syscall.Unlink(s.path)
	s.path = ""
	if err != nil && err != syscall.ENOENT {
		return fmt.Errorf("nodeseg: unlink: %w", err)
	}
	return nil
}

// Close unmaps the segment (idempotent). It does not unlink the file.
func (s *Seg) Close() error {
	if s == nil || s.mem == nil {
		return nil
	}
	err := syscall.Munmap(s.mem)
	s.mem = nil
	if err != nil {
		return fmt.Errorf("nodeseg: munmap: %w", err)
	}
	return nil
}

var sweepOnce = sync.OnceFunc(func() { _, _ = Sweep() })

// Sweep removes the segment files in Dir whose creating process no longer
// runs (no such pid in /proc, or the pid now belongs to a process started
// at another time), and returns how many it removed. It judges by this
// process's /proc: processes of another pid namespace that share Dir look
// gone, and their files are removed too (their mappings stay valid; only
// a peer that has not opened a file yet would miss it).
func Sweep() (int, error) { return SweepDir(Dir()) }

// SweepDir is Sweep of directory dir (a launcher sweeps the directory its
// ranks were given).
func SweepDir(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("nodeseg: sweep: %w", err)
	}
	n := 0
	for _, e := range ents {
		pid, start, ok := owner(e.Name())
		if !ok || alive(pid, start) {
			continue
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil {
			n++
		}
	}
	return n, nil
}

// owner parses weft-<kind>-<pid>-<start>-<random>.
func owner(name string) (pid int, start uint64, ok bool) {
	if !strings.HasPrefix(name, prefix) {
		return 0, 0, false
	}
	f := strings.Split(name[len(prefix):], "-")
	if len(f) != 4 || f[0] == "" {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(f[1])
	s, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return 0, 0, false
	}
	return p, s, true
}

// alive reports whether process pid started at start still runs.
func alive(pid int, start uint64) bool {
	st, err := startTime(pid)
	if err != nil {
		return !os.IsNotExist(err) // unreadable: assume alive
	}
	return st == start
}

// Owned reports whether name is a segment created by process pid (for
// launchers that remove what their children left).
func Owned(name string, pid int) bool {
	p, _, ok := owner(name)
	return ok && p == pid
}
