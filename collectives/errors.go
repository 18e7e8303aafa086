package collectives

import "github.com/weft-hpc/weft/errs"

// Sentinel errors. Errors returned by this package wrap one of these (or
// one of package endpoint's, which are the same values) and can be tested
// with errors.Is. Each is the shared sentinel of package errs of the same
// name.
var (
	// ErrInvalid reports a bad argument (a buffer of the wrong length, a
	// root outside the communicator, an element type holding pointers) or
	// a mismatch between ranks: a rank that called another collective, or
	// the same one with another root, count or operation.
	ErrInvalid = errs.ErrInvalid
	// ErrClosed reports use of a freed handle, or of a handle whose earlier
	// collective failed (its communicator is then in an unknown state).
	ErrClosed = errs.ErrClosed
	// ErrTruncated reports a rank that sent more than its peer expects.
	ErrTruncated = errs.ErrTruncated
	// ErrCanceled reports a collective another rank abandoned (its context
	// ended, or it failed) while this rank waited for it.
	ErrCanceled = errs.ErrCanceled
	// ErrPeerGone reports a wait on a rank whose process has exited.
	ErrPeerGone = errs.ErrPeerGone
	// ErrOutOfRange reports elements of a datatype outside their buffer
	// (ddt.ErrBounds).
	ErrOutOfRange = errs.ErrOutOfRange
)
