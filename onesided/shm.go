package onesided

// Shared memory for the direct-store path.
//
// All ranks of one node map the same file under /dev/shm (WEFT_SHM_DIR
// overrides the directory). The node's lowest rank creates it with O_EXCL,
// sizes it and publishes its name through the group's Allgather; the others
// open it, and once every rank has mapped it the creator unlinks it so a
// crashed job leaves nothing behind. The mapping is MAP_SHARED memory outside
// the Go heap, so it may be registered with libfabric without pinning and
// accessed through sync/atomic from every process.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/weft-hpc/weft/internal/settings"
)

// shmSeg is one mapped shared-memory file.
type shmSeg struct {
	path string
	mem  []byte
}

// shmDir is where node-shared files live.
func shmDir() string {
	d, _, _ := settings.Str("WEFT_SHM_DIR")
	return d
}

// nodeKey identifies the node this process runs on: the hostname plus the
// kernel boot id, so that two containers sharing a hostname but not memory
// are told apart. WEFT_NODE_ID overrides it (for tests that want to pretend
// ranks live on different nodes).
func nodeKey() string {
	if v, _, _ := settings.Str("WEFT_NODE_ID"); v != "" {
		return v
	}
	return machineKey()
}

// machineKey identifies the machine itself (hostname + boot id), whatever
// WEFT_NODE_ID says: ranks on one machine share its cores.
func machineKey() string {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return host + "/" + string(bytes.TrimSpace(boot))
}

// newShmName returns a fresh, unguessable file name for a segment.
func newShmName() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("onesided: random shm name: %w", err)
	}
	return fmt.Sprintf("weft-win-%d-%s", os.Getpid(), hex.EncodeToString(b[:])), nil
}

// createShm creates and maps a new segment of size bytes.
func createShm(name string, size int) (*shmSeg, error) {
	return mapShm(name, size, true)
}

// openShm maps an existing segment created by another process.
func openShm(name string, size int) (*shmSeg, error) {
	return mapShm(name, size, false)
}

func mapShm(name string, size int, create bool) (*shmSeg, error) {
	if size <= 0 {
		size = pageSize
	}
	if strings.ContainsRune(name, '/') || name == "" {
		return nil, fmt.Errorf("onesided: bad shm segment name %q: %w", name, ErrInvalid)
	}
	path := filepath.Join(shmDir(), name)
	flags := syscall.O_RDWR | syscall.O_CLOEXEC
	if create {
		flags |= syscall.O_CREAT | syscall.O_EXCL
	}
	fd, err := syscall.Open(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("onesided: open shm %s: %w", path, err)
	}
	defer syscall.Close(fd)
	if create {
		if err := syscall.Ftruncate(fd, int64(size)); err != nil {
			_ = syscall.Unlink(path)
			return nil, fmt.Errorf("onesided: size shm %s to %d bytes: %w", path, size, err)
		}
	} else {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, fmt.Errorf("onesided: stat shm %s: %w", path, err)
		}
		if st.Size < int64(size) {
			return nil, fmt.Errorf("onesided: shm %s has %d bytes, want %d: %w", path, st.Size, size, ErrInvalid)
		}
	}
	mem, err := syscall.Mmap(fd, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		if create {
			_ = syscall.Unlink(path)
		}
		return nil, fmt.Errorf("onesided: mmap shm %s (%d bytes): %w", path, size, err)
	}
	return &shmSeg{path: path, mem: mem}, nil
}

// unlink removes the file; existing mappings stay valid.
func (s *shmSeg) unlink() error {
	if s == nil || s.path == "" {
		return nil
	}
	err := syscall.Unlink(s.path)
	s.path = ""
	if err != nil && err != syscall.ENOENT {
		return fmt.Errorf("onesided: unlink shm: %w", err)
	}
	return nil
}

// close unmaps the segment (idempotent).
func (s *shmSeg) close() error {
	if s == nil || s.mem == nil {
		return nil
	}
	err := syscall.Munmap(s.mem)
	s.mem = nil
	if err != nil {
		return fmt.Errorf("onesided: munmap shm: %w", err)
	}
	return nil
}

// anonMap maps private-to-this-process memory outside the Go heap, used for
// a rank's region when the direct-store path is off.
func anonMap(size int) ([]byte, error) {
	if size <= 0 {
		size = pageSize
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("onesided: mmap %d bytes: %w", size, err)
	}
	return mem, nil
}

const pageSize = 4096

func roundUp(n, a int) int { return (n + a - 1) / a * a }
