package onesided

import (
	"errors"

	"github.com/weft-hpc/weft/internal/peerwatch"
)

// Sentinel errors. Methods wrap them with context; test with errors.Is.
var (
	// ErrInvalid reports a bad argument (negative size, misaligned signal,
	// unknown operation, nil group, ...).
	ErrInvalid = errors.New("onesided: invalid argument")
	// ErrOutOfRange reports an access outside the target rank's region.
	ErrOutOfRange = errors.New("onesided: offset out of range")
	// ErrUnknownRank reports a target rank outside [0, Size()).
	ErrUnknownRank = errors.New("onesided: unknown rank")
	// ErrClosed reports use of a freed window or heap.
	ErrClosed = errors.New("onesided: window freed")
	// ErrNotSupported reports an operation the chosen path cannot do (for
	// example an atomic the provider does not grant).
	ErrNotSupported = errors.New("onesided: not supported")
	// ErrNoPath reports a target that no configured path can reach (for
	// example a rank on another node with the direct-store path forced).
	ErrNoPath = errors.New("onesided: no path to target")
	// ErrTimeout reports a wait without a context (FetchAndOp,
	// CompareAndSwap, an operation stuck behind a full queue) that outlasted
	// WEFT_ONESIDED_TIMEOUT: usually a target that stopped making progress.
	ErrTimeout = errors.New("onesided: operation timed out")
	// ErrPeerGone reports a wait on a rank of the window that will never
	// answer: its process, on this node, has exited (waits look for this
	// once they have been blocked for a while, about every 100 ms), or it
	// is a rank in this process that freed the window without
	// synchronising (its Free failed, or its context had ended). It is the
	// same error as endpoint.ErrPeerGone.
	ErrPeerGone = peerwatch.ErrPeerGone
	// ErrOutOfMemory reports a symmetric heap that cannot satisfy Alloc.
	ErrOutOfMemory = errors.New("onesided: symmetric heap exhausted")
)
