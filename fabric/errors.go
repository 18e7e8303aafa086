package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/weft-hpc/weft/errs"
)

// Sentinel errors. Every error returned by this package that stems from a
// libfabric return code is an *Error or *CQError; errors.Is matches them
// against these sentinels and against the raw syscall.Errno. ErrTruncated,
// ErrCanceled, ErrClosed, ErrNotSupported and ErrInvalid are the shared
// sentinels of package errs.
var (
	// ErrAgain means the provider has no resources right now: read the
	// completion queue (which drives progress) and retry the operation.
	ErrAgain = errors.New("fabric: resource temporarily unavailable (poll the CQ and retry)")
	// ErrTruncated means a receive buffer was smaller than the message.
	ErrTruncated = errs.ErrTruncated
	// ErrCanceled means an operation was canceled (Endpoint.Cancel).
	ErrCanceled = errs.ErrCanceled
	// ErrClosed means the object (or one of its parents) was closed.
	ErrClosed = errs.ErrClosed
	// ErrNotSupported means the provider did not grant the capability.
	ErrNotSupported = errs.ErrNotSupported
	// ErrNoProvider means no provider matched the hints.
	ErrNoProvider = errors.New("fabric: no provider matches the hints")
	// ErrInvalid means an argument was invalid.
	ErrInvalid = errs.ErrInvalid
	// ErrAddrNotAvail means an address could not be resolved or inserted.
	ErrAddrNotAvail = errors.New("fabric: address not available")
)

// libfabric error numbers that are not plain errno values.
const (
	errnoAvail = syscall.Errno(C.FI_EAVAIL)
	errnoTrunc = syscall.Errno(C.FI_ETRUNC)
	errnoOther = syscall.Errno(C.FI_EOTHER)
)

// Error is a failed libfabric call: the operation (the fi_* function), the
// errno it returned (positive) and libfabric's text for it.
type Error struct {
	Op    string
	Errno syscall.Errno
	Text  string
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("fabric: %s: %s (errno %d)", e.Op, e.Text, int(e.Errno))
}

// Unwrap returns the raw errno, so errors.Is(err, syscall.EAGAIN) works.
func (e *Error) Unwrap() error { return e.Errno }

// Is matches the sentinel that corresponds to the errno.
func (e *Error) Is(target error) bool { return errnoIs(e.Errno, target) }

func errnoIs(no syscall.Errno, target error) bool {
	switch target {
	case ErrAgain:
		return no == syscall.EAGAIN
	case ErrTruncated:
		return no == errnoTrunc
	case ErrCanceled:
		return no == syscall.ECANCELED
	case ErrNotSupported:
		return no == syscall.EOPNOTSUPP || no == syscall.ENOSYS
	case ErrNoProvider:
		return no == syscall.ENODATA
	case ErrInvalid:
		return no == syscall.EINVAL
	case ErrAddrNotAvail:
		return no == syscall.EADDRNOTAVAIL
	}
	return false
}

// CQError is an error completion read from a completion queue
// (fi_cq_readerr). Err is the generic error (matching ErrTruncated,
// ErrCanceled, ...); ProvErrno and Text are the provider's detail
// (fi_cq_strerror).
type CQError struct {
	Context   uint64 // the ctx handle of the failed operation
	Flags     uint64 // completion flags (CompSend, CompRecv, ...)
	Err       error  // *Error with Op "fi_cq_readerr"
	ProvErrno int
	Text      string
	Len, Olen int // bytes transferred, overflow length (truncation)
	Tag, Data uint64
}

// Error implements error.
func (e *CQError) Error() string {
	return fmt.Sprintf("fabric: completion error (ctx %#x): %v; provider errno %d: %s", e.Context, e.Err, e.ProvErrno, e.Text)
}

// Unwrap returns Err.
func (e *CQError) Unwrap() error { return e.Err }

func strerror(no int) string { return C.GoString(C.weft_strerror(C.int(no))) }

// mkErr turns a negative libfabric return code into an *Error. EAGAIN
// errors for the hot-path operations are boxed once (see agains).
func mkErr(op string, ret int) error {
	if ret >= 0 {
		return nil
	}
	no := syscall.Errno(-ret)
	return &Error{Op: op, Errno: no, Text: strerror(int(no))}
}

// hot-path operation ids, used to box EAGAIN once per operation.
type opID int

const (
	opSend opID = iota
	opSendData
	opRecv
	opInject
	opInjectData
	opTSend
	opTSendData
	opTInject
	opTInjectData
	opTRecv
	opWrite
	opWriteData
	opWriteMsg
	opInjectWrite
	opInjectWriteData
	opRead
	opAtomic
	opFetchAtomic
	opCompareAtomic
	opAtomicMsg
	opInjectAtomic
	opSendV
	opRecvV
	opTSendV
	opTRecvV
	opWriteV
	opReadV
	opCancel
	opCQRead
	numOps
)

var opNames = [numOps]string{
	"fi_send", "fi_senddata", "fi_recv", "fi_inject", "fi_injectdata",
	"fi_tsend", "fi_tsenddata", "fi_tinject", "fi_tinjectdata", "fi_trecv",
	"fi_write", "fi_writedata", "fi_writemsg", "fi_inject_write", "fi_inject_writedata", "fi_read",
	"fi_atomic", "fi_fetch_atomic", "fi_compare_atomic", "fi_atomicmsg", "fi_inject_atomic",
	"fi_sendv", "fi_recvv", "fi_tsendv", "fi_trecvv", "fi_writev", "fi_readv",
	"fi_cancel", "fi_cq_read",
}

var (
	agains    [numOps]*Error
	closeds   [numOps]error
	errNoAddr [numOps]error
	// errInjectSize is returned for an inject larger than Info.InjectSize.
	errInjectSize [numOps]error
)

// noAddr is what MR.RemoteAddr returns for memory outside the region.
const noAddr = ^uint64(0)

func init() {
	txt := strerror(int(syscall.EAGAIN))
	for i := range agains {
		agains[i] = &Error{Op: opNames[i], Errno: syscall.EAGAIN, Text: txt}
		closeds[i] = fmt.Errorf("fabric: %s: %w", opNames[i], ErrClosed)
		errInjectSize[i] = fmt.Errorf("fabric: %s: message larger than the provider's inject size (Info.InjectSize): %w", opNames[i], ErrInvalid)
		errNoAddr[i] = fmt.Errorf("fabric: %s: remote address is MR.RemoteAddr's \"outside the region\" value: %w", opNames[i], ErrInvalid)
	}
}

// opErr converts the return code of a hot-path operation.
func opErr(op opID, ret C.ssize_t) error {
	if ret == 0 {
		return nil
	}
	if ret == -C.FI_EAGAIN {
		return agains[op]
	}
	return mkErr(opNames[op], int(ret))
}
