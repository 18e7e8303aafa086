package onesided

import (
	"errors"

	"github.com/weft-hpc/weft/errs"
)

// Sentinel errors. Methods wrap them with context; test with errors.Is.
// ErrInvalid, ErrOutOfRange, ErrClosed, ErrNotSupported, ErrTimeout and
// ErrPeerGone are the shared sentinels of package errs, so errors.Is gives
// the same answer with onesided's, endpoint's, fabric's or ddt's name.
var (
	// ErrInvalid reports a bad argument (negative size, misaligned signal,
	// unknown operation, nil group, ...).
	ErrInvalid = errs.ErrInvalid
	// ErrOutOfRange reports an access outside the target rank's region.
	ErrOutOfRange = errs.ErrOutOfRange
	// ErrUnknownRank reports a target rank outside [0, Size()).
	ErrUnknownRank = errors.New("onesided: unknown rank")
	// ErrClosed reports use of a freed window or heap.
	ErrClosed = errs.ErrClosed
	// ErrNotSupported reports an operation the chosen path cannot do (for
	// example an atomic the provider does not grant).
	ErrNotSupported = errs.ErrNotSupported
	// ErrNoPath reports a target that no configured path can reach (for
	// example a rank on another node with the direct-store path forced).
	ErrNoPath = errors.New("onesided: no path to target")
	// ErrTimeout reports a wait without a context (FetchAndOp,
	// CompareAndSwap, an operation stuck behind a full queue) that outlasted
	// WEFT_ONESIDED_TIMEOUT: usually a target that stopped making progress.
	ErrTimeout = errs.ErrTimeout
	// ErrPeerGone reports a wait on a rank of the window that will never
	// answer: its process, on this node, has exited (waits look for this
	// once they have been blocked for a while, about every 100 ms), or it
	// is a rank in this process that freed the window without
	// synchronising (its Free failed, or its context had ended).
	ErrPeerGone = errs.ErrPeerGone
	// ErrOutOfMemory reports a symmetric heap that cannot satisfy Alloc.
	ErrOutOfMemory = errors.New("onesided: symmetric heap exhausted")
)
