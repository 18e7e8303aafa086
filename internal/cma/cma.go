// Package cma copies bytes straight between the memory of two processes of
// one node with Linux cross-memory attach: process_vm_readv and
// process_vm_writev. One call moves the bytes once, from the peer's pages
// to the caller's (or back), with no shared staging buffer and nothing
// registered; it is the single-copy path for messages too large for the
// 64-byte cells of internal/shmring.
//
// The kernel allows the calls toward a process the caller may ptrace
// (PTRACE_MODE_ATTACH): the same uid (or CAP_SYS_PTRACE), and, where the
// Yama module is loaded, /proc/sys/kernel/yama/ptrace_scope 0, or 1 with
// the peer a descendant of the caller (or having named it with
// prctl(PR_SET_PTRACER)); 2 and 3 refuse it to unprivileged callers. A
// container's seccomp profile may also refuse the calls. Available probes
// all of this toward one peer.
//
// Errors wrap the sentinels of package errs and the errno:
// errs.ErrPeerGone (ESRCH: the process does not exist or has exited),
// errs.ErrNotSupported (EPERM, ENOSYS: the kernel or its policy refuses),
// errs.ErrInvalid (EFAULT, EINVAL: an address range not mapped, or not
// mapped with the needed access, in either process).
package cma

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/weft-hpc/weft/errs"
	"golang.org/x/sys/unix"
)

// iovMax is the kernel's limit on iovecs per call (UIO_MAXIOV, IOV_MAX).
const iovMax = 1024

// maxChunk is the most bytes one iovec asks for. The kernel caps one call
// at MAX_RW_COUNT (INT_MAX rounded down to a page), so a longer transfer is
// split into iovecs of at most maxChunk bytes, iovMax of them per call. A
// parameter of transfer, so that tests can exercise the splitting with
// small buffers.
const maxChunk = 1 << 30

// yamaPath holds Yama's ptrace policy where the module is loaded.
const yamaPath = "/proc/sys/kernel/yama/ptrace_scope"

// Read copies len(local) bytes from address remoteAddr of process pid into
// local. It returns the bytes copied, len(local) when err is nil; on an
// error the first n bytes of local hold the peer's first n bytes.
func Read(pid int, local []byte, remoteAddr uintptr) (int, error) {
	return transfer("read", pid, local, remoteAddr, maxChunk)
}

// Write copies local to address remoteAddr of process pid. It returns the
// bytes copied, len(local) when err is nil; on an error the first n bytes
// reached the peer.
func Write(pid int, local []byte, remoteAddr uintptr) (int, error) {
	return transfer("write", pid, local, remoteAddr, maxChunk)
}

// transfer loops on partial transfers: the kernel stops at the first page
// it cannot reach, so a short count is followed by one more call that
// reports why (or goes on, if the peer mapped the page meanwhile). Each
// iovec covers at most chunk bytes.
func transfer(op string, pid int, local []byte, remoteAddr uintptr, chunk int) (int, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("cma: %s: pid %d: %w", op, pid, errs.ErrInvalid)
	}
	if len(local) == 0 {
		return 0, nil
	}
	if remoteAddr+uintptr(len(local)) < remoteAddr {
		return 0, fmt.Errorf("cma: %s: pid %d: range %#x+%d wraps the address space: %w", op, pid, remoteAddr, len(local), errs.ErrInvalid)
	}
	liov := make([]unix.Iovec, 0, min(iovMax, (len(local)+chunk-1)/chunk))
	riov := make([]unix.RemoteIovec, 0, cap(liov))
	done := 0
	for done < len(local) {
		liov, riov = liov[:0], riov[:0]
		for off := done; off < len(local) && len(liov) < iovMax; off += chunk {
			n := min(chunk, len(local)-off)
			v := unix.Iovec{Base: &local[off]}
			v.SetLen(n)
			liov = append(liov, v)
			riov = append(riov, unix.RemoteIovec{Base: remoteAddr + uintptr(off), Len: n})
		}
		var n int
		var err error
		if op == "read" {
			n, err = unix.ProcessVMReadv(pid, liov, riov, 0)
		} else {
			n, err = unix.ProcessVMWritev(pid, liov, riov, 0)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, wrap(op, pid, remoteAddr+uintptr(done), len(local)-done, err)
		}
		if n == 0 {
			// Not expected from the kernel for a non-empty request;
			// refuse to spin on it.
			return done, fmt.Errorf("cma: %s %d bytes at %#x of pid %d: no progress: %w", op, len(local)-done, remoteAddr+uintptr(done), pid, errs.ErrInvalid)
		}
		done += n
	}
	return done, nil
}

// wrap maps an errno of process_vm_readv/writev to the shared sentinels.
func wrap(op string, pid int, addr uintptr, n int, err error) error {
	what := fmt.Sprintf("cma: %s %d bytes at %#x of pid %d", op, n, addr, pid)
	switch {
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("%s: no such process: %w: %w", what, errs.ErrPeerGone, err)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%s: ptrace access refused (%s): %w: %w", what, policy(), errs.ErrNotSupported, err)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%s: process_vm_readv/writev unavailable (kernel without CONFIG_CROSS_MEMORY_ATTACH, or refused by a seccomp profile): %w: %w", what, errs.ErrNotSupported, err)
	case errors.Is(err, unix.EFAULT), errors.Is(err, unix.EINVAL):
		return fmt.Errorf("%s: address range not mapped or not accessible: %w: %w", what, errs.ErrInvalid, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// policy describes the ptrace rules of this machine for an EPERM message.
func policy() string {
	b, err := os.ReadFile(yamaPath)
	if err != nil {
		return "needs the same uid or CAP_SYS_PTRACE; Yama not loaded (no " + yamaPath + ")"
	}
	s := strings.TrimSpace(string(b))
	var rule string
	switch s {
	case "0":
		rule = "any process of the same uid"
	case "1":
		rule = "only descendants, or processes that named the caller with prctl(PR_SET_PTRACER)"
	case "2":
		rule = "only with CAP_SYS_PTRACE"
	case "3":
		rule = "never"
	default:
		rule = "unknown value"
	}
	return "needs the same uid or CAP_SYS_PTRACE; Yama " + yamaPath + " = " + s + ": " + rule
}

// Available reports whether Read and Write can work toward process pid:
// nil if they can, else an error wrapping errs.ErrPeerGone (no such
// process), errs.ErrNotSupported (the kernel, its ptrace policy or a
// seccomp profile refuses them; the message names the Yama ptrace_scope in
// force) or errs.ErrInvalid (pid not positive).
//
// It asks the kernel itself: it reads one byte at address 0 of the peer,
// which no process maps (vm.mmap_min_addr). The kernel looks up the
// process, then checks the caller's access, and only then touches the
// address, so EFAULT means access is granted.
func Available(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("cma: available: pid %d: %w", pid, errs.ErrInvalid)
	}
	var b [1]byte
	liov := []unix.Iovec{{Base: &b[0]}}
	liov[0].SetLen(1)
	riov := []unix.RemoteIovec{{Base: 0, Len: 1}}
	for {
		_, err := unix.ProcessVMReadv(pid, liov, riov, 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == nil, errors.Is(err, unix.EFAULT):
			return nil
		}
		return wrap("probe", pid, 0, 1, err)
	}
}

// Addr returns the address of the first byte of b, for a peer to pass to
// Read or Write; 0 for an empty slice. The caller keeps b alive (and, for
// Go memory, referenced) while a peer may copy to or from it.
func Addr(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

// Seg is one block of a peer's memory: Len bytes at address Addr.
type Seg struct {
	Addr uintptr
	Len  int
}

// ReadSegs fills local with the bytes of the peer's blocks segs, in order,
// as if they were one stream: a gather from the peer's memory in one copy
// (process_vm_readv with one remote iovec per block, up to the kernel's
// 1024 per call). The blocks must hold at least len(local) bytes. It
// returns the bytes copied, len(local) when err is nil.
func ReadSegs(pid int, local []byte, segs []Seg) (int, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("cma: read: pid %d: %w", pid, errs.ErrInvalid)
	}
	total := 0
	for _, s := range segs {
		if s.Len < 0 || s.Addr+uintptr(s.Len) < s.Addr {
			return 0, fmt.Errorf("cma: read: block %#x+%d: %w", s.Addr, s.Len, errs.ErrInvalid)
		}
		total += s.Len
		if total >= len(local) {
			break
		}
	}
	if total < len(local) {
		return 0, fmt.Errorf("cma: read %d bytes from blocks of %d: %w", len(local), total, errs.ErrInvalid)
	}
	var liov [1]unix.Iovec
	riov := make([]unix.RemoteIovec, 0, min(iovMax, len(segs)))
	done, si, skip := 0, 0, 0 // next block, bytes of it already read
	for done < len(local) {
		riov = riov[:0]
		want := 0
		for i := si; i < len(segs) && len(riov) < iovMax && want < len(local)-done; i++ {
			s := segs[i]
			off := 0
			if i == si {
				off = skip
			}
			n := min(s.Len-off, maxChunk, len(local)-done-want)
			if n <= 0 {
				continue
			}
			riov = append(riov, unix.RemoteIovec{Base: s.Addr + uintptr(off), Len: n})
			want += n
		}
		liov[0] = unix.Iovec{Base: &local[done]}
		liov[0].SetLen(want)
		n, err := unix.ProcessVMReadv(pid, liov[:], riov, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, wrap("read", pid, riov[0].Base, want, err)
		}
		if n == 0 {
			return done, fmt.Errorf("cma: read %d bytes from pid %d: no progress: %w", want, pid, errs.ErrInvalid)
		}
		done += n
		for n > 0 { // advance through the blocks by what was read
			left := segs[si].Len - skip
			if n < left {
				skip += n
				break
			}
			n -= left
			si, skip = si+1, 0
		}
	}
	return done, nil
}
