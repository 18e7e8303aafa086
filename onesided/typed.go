package onesided

import (
	"context"
	"errors"
	"fmt"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/checked"
	"sync"
)

// PutTyped is Put with derived datatypes on both sides (MPI_Put with origin
// and target datatypes): originCount elements of originType are taken from
// origin (origin[0] is displacement 0 of element 0) and stored as
// targetCount elements of targetType starting at offset in target's region.
// Both types must be committed and carry the same number of bytes.
//
// Direct-store targets are written straight from the origin: a
// contiguous side is read or written in place, otherwise the data goes
// through a 64 KiB piece at a time (packed from the origin, unpacked into
// the shared region while it is in the cache), never a copy of the whole
// transfer. On the libfabric path a contiguous origin, or one whose
// blocks average at least WEFT_TUNE's zcblock (64 KiB), is written straight from its blocks with
// fi_writev to each contiguous block of the target type (at most the
// provider's iov_limit origin pieces per write; the origin is registered
// through the MR cache); an origin of smaller blocks is packed 64 KiB at a
// time into the window's registered chunk buffers, each chunk written as
// soon as it is packed. As with Put, origin must not be modified until
// the next flush of target.
func (w *Window) PutTyped(target, offset int, origin []byte, originCount int, originType *ddt.Type,
	targetCount int, targetType *ddt.Type) error {
	n, err := w.typedPrep("PutTyped", target, originCount, originType, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	if p := w.peers[target]; p != nil {
		return transcode("PutTyped", p, int64(offset), targetCount, targetType, origin, 0, originCount, originType, n, false)
	}
	segs, err := w.typedSegments("PutTyped", target, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	return w.netTyped(context.Background(), "PutTyped", target, offset, segs, origin, originCount, originType, n, false)
}

// GetTyped is Get with derived datatypes (MPI_Get with origin and target
// datatypes): targetCount elements of targetType at offset in target's
// region are read into originCount elements of originType in origin. Unlike
// Get it waits until origin holds the data. On the libfabric path the
// target's blocks are read with fi_readv straight into the origin's
// blocks when it is contiguous or its blocks average at least zcblock, else
// 64 KiB at a time into a registered chunk buffer that is unpacked into
// origin as soon as its reads complete.
func (w *Window) GetTyped(ctx context.Context, target, offset int, origin []byte, originCount int,
	originType *ddt.Type, targetCount int, targetType *ddt.Type) error {
	n, err := w.typedPrep("GetTyped", target, originCount, originType, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	if p := w.peers[target]; p != nil {
		return transcode("GetTyped", origin, 0, originCount, originType, p, int64(offset), targetCount, targetType, n, true)
	}
	segs, err := w.typedSegments("GetTyped", target, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	if err := w.netTyped(ctx, "GetTyped", target, offset, segs, origin, originCount, originType, n, true); err != nil {
		return err
	}
	return w.net.flush(ctx, target)
}

// netTyped moves a typed transfer of n bytes between the origin layout
// and the target blocks segs on the libfabric path: the origin's own
// blocks by iovec RMA when it is contiguous or its blocks are large,
// else through the window's chunk buffers (fabtyped.go).
func (w *Window) netTyped(ctx context.Context, op string, target, offset int, segs []ddt.Segment,
	origin []byte, count int, t *ddt.Type, n int, get bool) error {
	if n == 0 {
		return nil
	}
	if pieces, err := originPieces(op, origin, count, t, n); err != nil {
		return err
	} else if pieces != nil {
		release, err := w.net.hold(spanOf(pieces[0], pieces[len(pieces)-1]))
		if err != nil {
			return fmt.Errorf("onesided: %s: register origin: %w", op, err)
		}
		defer release()
		return w.net.typedVec(target, offset, segs, pieces, get)
	}
	pack := func(b []byte, off int) (func() error, error) {
		if _, err := t.PackRange(b, origin, 0, count, int64(off)); err != nil {
			return nil, fmt.Errorf("onesided: %s: pack origin: %w: %w", op, ErrInvalid, err)
		}
		return nil, nil
	}
	unpack := func(b []byte, off int) (func() error, error) {
		if _, err := t.UnpackRange(origin, b, 0, count, int64(off)); err != nil {
			return nil, fmt.Errorf("onesided: %s: unpack origin: %w: %w", op, ErrInvalid, err)
		}
		return nil, nil
	}
	if get {
		return w.net.typedChunks(ctx, target, offset, segs, n, nil, unpack)
	}
	return w.net.typedChunks(ctx, target, offset, segs, n, pack, nil)
}

// originPieces returns the origin's blocks as slices of origin when it
// is one block or its blocks average at least zcBlock bytes, else nil.
func originPieces(op string, origin []byte, count int, t *ddt.Type, n int) ([][]byte, error) {
	limit := max(1, min(1<<16, n/zcBlock))
	if t.ExceedsSegments(count, limit) {
		return nil, nil
	}
	segs, err := t.Flatten(count, limit)
	if err != nil || len(segs) == 0 || (len(segs) > 1 && n/len(segs) < zcBlock) {
		return nil, nil
	}
	out := make([][]byte, 0, len(segs))
	for _, s := range segs {
		if s.Off < 0 || s.Off > int64(len(origin)) || s.Len > int64(len(origin))-s.Off {
			return nil, fmt.Errorf("onesided: %s: origin block [%d, %d) outside its %d bytes: %w: %w",
				op, s.Off, s.Off+s.Len, len(origin), ErrInvalid, ddt.ErrBounds)
		}
		out = append(out, origin[s.Off:s.Off+s.Len:s.Off+s.Len])
	}
	return out, nil
}

// typedPrep validates a typed transfer and returns its packed size.
func (w *Window) typedPrep(op string, target, originCount int, originType *ddt.Type,
	offset, targetCount int, targetType *ddt.Type) (int, error) {
	if err := w.check(op, target, 0, 0); err != nil {
		return 0, err
	}
	if originType == nil || targetType == nil {
		return 0, fmt.Errorf("onesided: %s: nil datatype: %w", op, ErrInvalid)
	}
	if !originType.Committed() || !targetType.Committed() {
		return 0, fmt.Errorf("onesided: %s: datatypes must be committed: %w", op, ErrInvalid)
	}
	on, err := originType.PackSize(originCount)
	if err != nil {
		return 0, fmt.Errorf("onesided: %s: origin: %w: %w", op, ErrInvalid, err)
	}
	tn, err := targetType.PackSize(targetCount)
	if err != nil {
		return 0, fmt.Errorf("onesided: %s: target: %w: %w", op, ErrInvalid, err)
	}
	if on != tn {
		return 0, fmt.Errorf("onesided: %s: origin carries %d bytes, target %d: %w", op, on, tn, ErrInvalid)
	}
	if offset < 0 || offset > w.sizes[target] {
		return 0, fmt.Errorf("onesided: %s: offset %d outside rank %d's %d bytes: %w", op, offset, target, w.sizes[target], ErrOutOfRange)
	}
	// A target layout's entries must not overlap (as in MPI), so it cannot
	// carry more bytes than the target holds from offset; checking before
	// the packed buffer is made keeps an overlapping layout from asking for
	// more memory than exists.
	if room := int64(w.sizes[target] - offset); on > room {
		return 0, fmt.Errorf("onesided: %s: the layouts carry %d bytes, more than rank %d's %d bytes from offset %d: %w", op, on, target, room, offset, ErrOutOfRange)
	}
	return int(on), nil
}

// pieceBytes is the piece a typed transfer between two non-contiguous
// layouts moves at a time: it stays in the cache from pack to unpack.
const pieceBytes = 64 << 10

var pieces = sync.Pool{New: func() any { b := make([]byte, pieceBytes); return &b }}

// transcode moves the n-byte stream of srcCount elements of srcType at
// src[srcBase] into dstCount elements of dstType at dst[dstBase]: in place
// when either side is contiguous, else a piece at a time. srcIsTarget says
// which side is the window's (its bounds errors are ErrOutOfRange, the
// origin's ErrInvalid). Every byte of both layouts is checked against its
// slice by the first call on each side, before anything moves.
func transcode(op string, dst []byte, dstBase int64, dstCount int, dstType *ddt.Type,
	src []byte, srcBase int64, srcCount int, srcType *ddt.Type, n int, srcIsTarget bool) error {
	srcErr, dstErr := ErrInvalid, ErrOutOfRange
	if srcIsTarget {
		srcErr, dstErr = ErrOutOfRange, ErrInvalid
	}
	if n == 0 {
		return nil
	}
	if seg, ok, err := srcType.OneSegment(srcCount); err == nil && ok {
		lo, hi := srcBase+seg.Off, srcBase+seg.Off+seg.Len
		if lo < 0 || hi > int64(len(src)) {
			return fmt.Errorf("onesided: %s: bytes [%d, %d) outside a %d-byte buffer: %w", op, lo, hi, len(src), srcErr)
		}
		if _, err := dstType.UnpackRange(dst, src[lo:hi], dstBase, dstCount, 0); err != nil {
			return fmt.Errorf("onesided: %s: %w: %w", op, dstErr, err)
		}
		return nil
	}
	if seg, ok, err := dstType.OneSegment(dstCount); err == nil && ok {
		lo, hi := dstBase+seg.Off, dstBase+seg.Off+seg.Len
		if lo < 0 || hi > int64(len(dst)) {
			return fmt.Errorf("onesided: %s: bytes [%d, %d) outside a %d-byte buffer: %w", op, lo, hi, len(dst), dstErr)
		}
		if _, err := srcType.PackRange(dst[lo:hi], src, srcBase, srcCount, 0); err != nil {
			return fmt.Errorf("onesided: %s: %w: %w", op, srcErr, err)
		}
		return nil
	}
	bp := pieces.Get().(*[]byte)
	defer pieces.Put(bp)
	piece := *bp
	for off := 0; off < n; {
		k := min(n-off, len(piece))
		if _, err := srcType.PackRange(piece[:k], src, srcBase, srcCount, int64(off)); err != nil {
			return fmt.Errorf("onesided: %s: %w: %w", op, srcErr, err)
		}
		if _, err := dstType.UnpackRange(dst, piece[:k], dstBase, dstCount, int64(off)); err != nil {
			return fmt.Errorf("onesided: %s: %w: %w", op, dstErr, err)
		}
		off += k
	}
	return nil
}

// typedSegments flattens the target layout and checks every block is in
// range.
func (w *Window) typedSegments(op string, target, offset, count int, t *ddt.Type) ([]ddt.Segment, error) {
	segs, err := t.Flatten(count, 0)
	if err != nil {
		if errors.Is(err, ddt.ErrOverflow) { // offsets past int64: past any region
			return nil, fmt.Errorf("onesided: %s: %w: %w", op, ErrOutOfRange, err)
		}
		return nil, fmt.Errorf("onesided: %s: %w: %w", op, ErrInvalid, err)
	}
	for _, s := range segs {
		off, ok := checked.Add(int64(offset), s.Off)
		if !ok || off != int64(int(off)) || s.Len != int64(int(s.Len)) {
			return nil, fmt.Errorf("onesided: %s: block at %d+%d outside rank %d's region: %w", op, offset, s.Off, target, ErrOutOfRange)
		}
		if err := w.check(op, target, int(off), int(s.Len)); err != nil {
			return nil, err
		}
	}
	return segs, nil
}
