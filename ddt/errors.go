package ddt

import (
	"errors"

	"github.com/weft-hpc/weft/errs"
)

// Sentinel errors. Every error returned by this package wraps one of them
// (test with errors.Is) and carries context in its message. ErrInvalid and
// ErrBounds are the shared errs.ErrInvalid and errs.ErrOutOfRange, so
// errors.Is gives the same answer with any package's name for them.
var (
	// ErrInvalid reports a bad argument: a negative or overflowing count,
	// blocklength or size, a nil or uncommitted type, mismatched slices.
	ErrInvalid = errs.ErrInvalid
	// ErrOverflow reports a size, extent or offset that does not fit in int64.
	ErrOverflow = errors.New("ddt: arithmetic overflow")
	// ErrNotCommitted reports use of a type in Pack/Unpack before Commit.
	ErrNotCommitted = errors.New("ddt: type not committed")
	// ErrBounds reports a buffer too small for count elements of the type
	// (checked against the true extent before any byte moves).
	ErrBounds = errs.ErrOutOfRange
	// ErrInternal reports a failed internal consistency check: a bug in
	// ddt or in a registered Compiler's Kernel, never bad input. The
	// destination of the failed call may have been partly written.
	ErrInternal = errors.New("ddt: internal error")
)
