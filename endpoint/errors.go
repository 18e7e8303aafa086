package endpoint

import (
	"github.com/weft-hpc/weft/errs"
)

// Sentinel errors. Errors returned by this package wrap one of these and
// can be tested with errors.Is. Each is the shared sentinel of package errs
// of the same name, so errors.Is gives the same answer with endpoint's,
// onesided's, fabric's or ddt's name for it.
var (
	// ErrInvalid reports a bad argument: a rank or tag out of range, a
	// negative count, a nil buffer where one is needed.
	ErrInvalid = errs.ErrInvalid
	// ErrClosed reports use of a communicator after Free or World.Close.
	ErrClosed = errs.ErrClosed
	// ErrTruncated reports a message longer than the receive buffer.
	ErrTruncated = errs.ErrTruncated
	// ErrCanceled reports a receive that Cancel removed before it matched.
	ErrCanceled = errs.ErrCanceled
	// ErrNotSupported reports an operation the endpoint cannot do (for
	// example cancelling a send).
	ErrNotSupported = errs.ErrNotSupported
	// ErrPeerGone reports a blocked operation (Wait, Recv, Send, WaitAll,
	// Probe, a collective) on a rank whose process, on this node, has
	// exited: it can never complete. Waits look for this once they have
	// been blocked for a while, about every 100 ms.
	ErrPeerGone = errs.ErrPeerGone
)
