// Package peerwatch tells a blocked wait whether the process of a rank it
// depends on has exited.
//
// Every rank publishes its Ident (node, pid and the process's start time)
// when a job or window is set up. A wait that has been blocked for a while
// asks a Watch, at most every Interval, whether the ranks it waits for are
// still alive. Only ranks on this node can be checked: their pids name
// processes in /proc. A rank whose pid is gone, belongs to a process with
// another start time (the pid was reused) or is a zombie has exited; a
// wait on it can never complete and fails with an error wrapping
// ErrPeerGone instead of spinning for ever. Ranks on other nodes are never
// reported (a provider's own timeouts, or the launcher, cover them).
package peerwatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/weft-hpc/weft/errs"
)

// ErrPeerGone reports a wait on a rank that can never answer: its process
// has exited (or, within one process, the rank has released the
// communicator or window without synchronising). It is errs.ErrPeerGone.
var ErrPeerGone = errs.ErrPeerGone

// Interval is how often a blocked wait checks its peers' processes.
const Interval = 100 * time.Millisecond

// Ident identifies one process: the node it runs on (host name, boot id
// and pid namespace), its pid and its start time (clock ticks since boot,
// which defeats pid reuse). The zero Ident is never watched.
type Ident struct {
	Node  string
	PID   int
	Start uint64
}

// Self returns this process's Ident (zero where /proc cannot tell it).
var Self = sync.OnceValue(func() Ident {
	pid := os.Getpid()
	start, _, err := Stat(pid)
	if err != nil {
		return Ident{}
	}
	return Ident{Node: nodeKey(), PID: pid, Start: start}
})

// nodeKey names the set of processes whose pids this process can look up
// in /proc: same kernel (host name, boot id) and same pid namespace.
func nodeKey() string {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return host + "/" + string(bytes.TrimSpace(boot)) + "/" + ns
}

// Append appends id's encoding to b.
func (id Ident) Append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(id.PID))
	b = binary.LittleEndian.AppendUint64(b, id.Start)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(id.Node)))
	return append(b, id.Node...)
}

// Parse decodes an Ident encoded by Append at the start of b and returns
// the rest of b.
func Parse(b []byte) (Ident, []byte, error) {
	if len(b) < 18 {
		return Ident{}, nil, fmt.Errorf("peerwatch: %d-byte process identity", len(b))
	}
	id := Ident{PID: int(binary.LittleEndian.Uint64(b)), Start: binary.LittleEndian.Uint64(b[8:])}
	n := int(binary.LittleEndian.Uint16(b[16:]))
	if n > len(b)-18 {
		return Ident{}, nil, fmt.Errorf("peerwatch: process identity with a %d-byte node name in %d bytes", n, len(b))
	}
	id.Node = string(b[18 : 18+n])
	return id, b[18+n:], nil
}

// Stat reads the start time (clock ticks since boot) and state of
// process pid from /proc/pid/stat. It allocates nothing (a wait checks
// its peers with it, and a wait should leave no garbage); an error
// wraps os.ErrNotExist where no process has that pid.
func Stat(pid int) (start uint64, state byte, err error) {
	var path [32]byte
	p := append(path[:0], "/proc/"...)
	p = strconv.AppendInt(p, int64(pid), 10)
	p = append(p, "/stat\x00"...)
	atFDCWD := unix.AT_FDCWD
	fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&p[0])), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return 0, 0, statErr(pid, e)
	}
	var buf [2048]byte
	n, rerr := readAll(int(fd), buf[:])
	unix.Close(int(fd))
	if rerr != nil {
		return 0, 0, statErr(pid, rerr)
	}
	return parseStat(pid, buf[:n])
}

// readAll reads fd into b until its end or b is full.
func readAll(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := unix.Read(fd, b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n, nil
}

// statErr is Stat's error for errno e: a process gone between the open
// and the read (ESRCH) is one that does not exist.
func statErr(pid int, e error) error {
	if e == unix.ESRCH {
		e = unix.ENOENT
	}
	return fmt.Errorf("peerwatch: /proc/%d/stat: %w", pid, e)
}

// parseStat takes the start time and state out of the contents of
// /proc/pid/stat: "pid (comm) state ppid ...", where comm may hold
// spaces and parentheses, the state is field 3 and the start time 22.
func parseStat(pid int, b []byte) (start uint64, state byte, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, fmt.Errorf("peerwatch: malformed /proc/%d/stat", pid)
	}
	field := 2 // the field before b[i+1:]
	for k := i + 1; k < len(b); {
		for k < len(b) && (b[k] == ' ' || b[k] == '\n') {
			k++
		}
		if k == len(b) {
			break
		}
		e := k
		for e < len(b) && b[e] != ' ' && b[e] != '\n' {
			e++
		}
		field++
		switch field {
		case 3:
			state = b[k]
		case 22:
			for _, c := range b[k:e] {
				if c < '0' || c > '9' {
					return 0, 0, fmt.Errorf("peerwatch: /proc/%d/stat start time %q", pid, string(b[k:e]))
				}
				start = start*10 + uint64(c-'0')
			}
			return start, state, nil
		}
		k = e
	}
	return 0, 0, fmt.Errorf("peerwatch: short /proc/%d/stat", pid)
}

// Exited reports whether id's process is certainly gone: id is on this
// node and its pid names no process, another process, or a zombie.
func (id Ident) Exited() bool {
	self := Self()
	if id.PID <= 0 || id.Node == "" || id.Node != self.Node {
		return false
	}
	if id.PID == self.PID {
		return false
	}
	start, state, err := Stat(id.PID)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	return start != id.Start || state == 'Z' || state == 'X' || state == 'x'
}

// Watch holds the identities of a group's ranks (by rank). A nil *Watch
// watches nothing.
type Watch struct {
	ids  []Ident
	gone []atomic.Bool // sticky: an exited process never comes back
}

// New returns a Watch over ids, indexed by rank. Ranks on other nodes, and
// this process's own ranks, are never reported.
func New(ids []Ident) *Watch {
	w := &Watch{ids: ids, gone: make([]atomic.Bool, len(ids))}
	return w
}

// Check returns an error wrapping ErrPeerGone if rank's process has
// exited, else nil (also for a rank out of range or not on this node).
func (w *Watch) Check(rank int) error {
	if w == nil || rank < 0 || rank >= len(w.ids) {
		return nil
	}
	if !w.gone[rank].Load() {
		if !w.ids[rank].Exited() {
			return nil
		}
		w.gone[rank].Store(true)
	}
	id := w.ids[rank]
	return fmt.Errorf("rank %d (pid %d on this node) exited: %w", rank, id.PID, ErrPeerGone)
}

// CheckAll is Check for every rank; it reports the lowest exited one.
func (w *Watch) CheckAll() error {
	if w == nil {
		return nil
	}
	for r := range w.ids {
		if err := w.Check(r); err != nil {
			return err
		}
	}
	return nil
}

// Pacer spaces a wait's checks Interval apart. The zero Pacer's first Due
// is true one Interval after its first call.
type Pacer struct{ next time.Time }

// Due reports whether a check is due now, and if so schedules the next.
func (p *Pacer) Due() bool {
	now := time.Now()
	if p.next.IsZero() {
		p.next = now.Add(Interval)
		return false
	}
	if now.Before(p.next) {
		return false
	}
	p.next = now.Add(Interval)
	return true
}
