package endpoint

import (
	"errors"

	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/internal/peerwatch"
)

// Sentinel errors. Errors returned by this package wrap one of these (or a
// fabric sentinel such as fabric.ErrTruncated, fabric.ErrCanceled) and can be
// tested with errors.Is.
var (
	// ErrInvalid reports a bad argument: a rank or tag out of range, a freed
	// communicator, a negative count.
	ErrInvalid = errors.New("invalid argument")
	// ErrFreed reports use of a communicator after Free or World.Close.
	ErrFreed = errors.New("communicator freed")
	// ErrTruncated reports a message longer than the receive buffer. It is
	// fabric.ErrTruncated, so errors.Is works with either name.
	ErrTruncated = fabric.ErrTruncated
	// ErrCanceled reports a receive that Cancel removed before it matched. It is
	// fabric.ErrCanceled.
	ErrCanceled = fabric.ErrCanceled
	// ErrNotSupported reports an operation the endpoint cannot do (for
	// example cancelling a send).
	ErrNotSupported = errors.New("operation not supported")
	// ErrPeerGone reports a blocked operation (Wait, Recv, Send, WaitAll,
	// Probe, a collective) on a rank whose process, on this node, has
	// exited: it can never complete. Waits look for this once they have
	// been blocked for a while, about every 100 ms. It is the same error as
	// onesided.ErrPeerGone.
	ErrPeerGone = peerwatch.ErrPeerGone
)
