// Package errs holds the sentinel errors shared by every weft package.
//
// Each library package re-exports the sentinels that apply to it under the
// same names (endpoint.ErrInvalid, onesided.ErrInvalid, ddt.ErrInvalid,
// fabric.ErrInvalid, ...), and those are the very values defined here, so
// one errors.Is test works whichever layer produced the error:
//
//	if errors.Is(err, errs.ErrTimeout) { ... }
//	if errors.Is(err, onesided.ErrTimeout) { ... } // the same test
//
// Errors returned by weft wrap a sentinel with context (the package, the
// call, the offending value); the sentinel's own text is short.
package errs

import "errors"

var (
	// ErrInvalid reports a bad argument: a negative size or count, a rank
	// or tag out of range, a misaligned offset, a nil value.
	ErrInvalid = errors.New("invalid argument")
	// ErrNotSupported reports an operation the chosen provider, path or
	// platform cannot do.
	ErrNotSupported = errors.New("not supported")
	// ErrClosed reports use of an object after it was closed, freed or
	// finalized.
	ErrClosed = errors.New("closed")
	// ErrTimeout reports a wait that outlasted its time limit.
	ErrTimeout = errors.New("timed out")
	// ErrPeerGone reports a wait on a rank that can never answer: its
	// process has exited, or, within one process, the rank released the
	// communicator or window without synchronising.
	ErrPeerGone = errors.New("peer rank gone")
	// ErrTruncated reports a message or value longer than the buffer that
	// receives it.
	ErrTruncated = errors.New("truncated")
	// ErrCanceled reports an operation that was canceled before it
	// completed.
	ErrCanceled = errors.New("canceled")
	// ErrOutOfRange reports an access outside a buffer, window or region.
	ErrOutOfRange = errors.New("out of range")
	// ErrRemote reports work another rank did on this rank's behalf that
	// failed there (an active message's handler): the error's text is
	// the remote one.
	ErrRemote = errors.New("failed on the remote rank")
)
