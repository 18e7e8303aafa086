package gpu

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weft-hpc/weft/errs"
)

// An Event is a pack or unpack started by PackAsync or UnpackAsync: on
// CUDA a kernel on the device's stream with an event recorded after it,
// on OpenCL a kernel and a map of the host buffer it writes, enqueued
// without a flush-and-wait. Many may be in flight; they complete in the
// order they were started. Its methods are safe for concurrent use.
type Event struct {
	d    *Device
	as   asyncer
	n    int64
	mu   sync.Mutex
	ev   any // the runtime's event; nil once complete
	err  error
	done bool
}

// Len returns the number of packed-stream bytes the operation moves.
func (e *Event) Len() int64 {
	if e == nil {
		return 0
	}
	return e.n
}

// errNoEvent is wrapped by calls on a nil or zero Event.
var errNoEvent = fmt.Errorf("gpu: a nil or zero Event (PackAsync and UnpackAsync make them): %w", errs.ErrInvalid)

// Done reports, without blocking, whether the operation has completed,
// and its error once it has.
func (e *Event) Done() (bool, error) {
	if e == nil || e.d == nil {
		return false, errNoEvent
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return true, e.err
	}
	ok, err := e.as.query(e.ev)
	if ok {
		e.finish(err)
	}
	return e.done, e.err
}

// Wait blocks until the operation has completed and returns its error, or
// ctx's error if ctx ends first (the operation then still completes on
// the device; Wait may be called again).
func (e *Event) Wait(ctx context.Context) error {
	if e == nil || e.d == nil {
		return errNoEvent
	}
	if ctx.Done() == nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		if !e.done {
			e.finish(e.as.wait(e.ev))
		}
		return e.err
	}
	pause := time.Microsecond
	for {
		if done, err := e.Done(); done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gpu: wait for a %d-byte launch: %w", e.n, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, 200*time.Microsecond)
	}
}

func (e *Event) finish(err error) {
	e.done, e.err = true, err
	if e.ev != nil {
		e.as.release(e.ev)
		e.ev = nil
	}
}

// PackAsync is Pack without waiting: the kernel is enqueued and the
// returned Event completes when dst holds the bytes (for mapped host
// memory: when the host and a NIC may read them). Launches on one device
// run in the order they were started, so segment k+1 may be packed while
// segment k is on the wire. Runtimes without streams (and contiguous
// types, which take one device copy) complete before PackAsync returns.
// Errors are Pack's.
func (d *Device) PackAsync(ctx context.Context, dst *Buffer, dstOff int64, src Typed, from, n int64) (*Event, error) {
	return d.async(ctx, dst, dstOff, src, from, n, false)
}

// UnpackAsync is Unpack without waiting (see PackAsync): src must not be
// modified until the Event completes.
func (d *Device) UnpackAsync(ctx context.Context, dst Typed, src *Buffer, srcOff int64, from, n int64) (*Event, error) {
	return d.async(ctx, src, srcOff, dst, from, n, true)
}

func (d *Device) async(ctx context.Context, pk *Buffer, poff int64, ty Typed, from, n int64, unpack bool) (*Event, error) {
	nb, ev, err := d.start(ctx, pk, poff, ty, from, n, unpack, true)
	if err != nil {
		return nil, err
	}
	e := &Event{d: d, n: nb, ev: ev, done: ev == nil}
	if ev != nil {
		e.as = d.be.(asyncer)
	}
	return e, nil
}

// stageSize is the size of a Device's staging buffer for PackBytes and
// UnpackBytes.
const stageSize = 1 << 20

// PackBytes packs the packed-stream bytes [from, from+len(dst)) of src,
// or as many as the stream has left, into dst, ordinary host memory, and
// returns how many it wrote: the kernel writes a pinned host buffer of
// the device's (mapped into the device) a megabyte at a time, copied into
// dst. Where the destination can be memory of the device's (AllocHost)
// Pack writes it without the copy. Errors are Pack's.
func (d *Device) PackBytes(ctx context.Context, dst []byte, src Typed, from int64) (int64, error) {
	return d.viaStage(ctx, dst, src, from, false)
}

// UnpackBytes is the reverse of PackBytes: len(src) bytes of ordinary
// host memory are unpacked into the packed-stream bytes from from of
// dst's elements.
func (d *Device) UnpackBytes(ctx context.Context, dst Typed, src []byte, from int64) (int64, error) {
	return d.viaStage(ctx, src, dst, from, true)
}

func (d *Device) viaStage(ctx context.Context, p []byte, ty Typed, from int64, unpack bool) (int64, error) {
	if !d.ok() {
		return 0, errNoDevice
	}
	if from < 0 {
		return 0, fmt.Errorf("gpu: stream offset %d: %w", from, errs.ErrInvalid)
	}
	d.stageMu.Lock()
	defer d.stageMu.Unlock()
	if d.stageBuf != nil && d.stageBuf.freed.Load() {
		return 0, ErrClosed
	}
	if d.stageBuf == nil {
		b, err := d.AllocHost(stageSize)
		if err != nil {
			return 0, err
		}
		d.stageBuf = b
	}
	var done int64
	for done < int64(len(p)) {
		k := min(int64(len(p))-done, stageSize)
		var nb int64
		var err error
		if unpack {
			copy(d.stageBuf.Bytes(), p[done:done+k])
			nb, err = d.Unpack(ctx, ty, d.stageBuf, 0, from+done, k)
		} else {
			nb, err = d.Pack(ctx, d.stageBuf, 0, ty, from+done, k)
			copy(p[done:], d.stageBuf.Bytes()[:nb])
		}
		done += nb
		if err != nil || nb < k {
			return done, err
		}
	}
	return done, nil
}

// CUDAPointer returns the device address of CUDA device memory (Alloc on
// a CUDA device) and the device's number, what a NIC's FI_HMEM
// registration needs; ok is false for mapped host memory and for other
// runtimes' memory.
func (b *Buffer) CUDAPointer() (ptr uint64, device int, ok bool) {
	if !b.ok() || b.d.be.kind() != "cuda" || b.m.host != nil {
		return 0, 0, false
	}
	return b.m.addr, b.d.ordinal, true
}

// Contiguous reports whether the Count elements of t are one run of bytes
// of t.Buf (a contiguous type, or one element without gaps), and at which
// byte of the buffer the run starts: such data needs no pack, a NIC can
// send it from where it is. Errors are Check's.
func (t Typed) Contiguous() (off int64, ok bool, err error) {
	if _, err := t.Check(); err != nil {
		return 0, false, err
	}
	p, err := PlanOf(t.Type)
	if err != nil {
		return 0, false, err
	}
	off, ok = p.contiguous(t.Base, t.Count)
	return off, ok, nil
}

// Check validates t the way Pack does before anything moves: a committed
// type with a GPU kernel, a live buffer, Count elements within it; it
// returns the size of their packed stream. Errors: errs.ErrInvalid (no
// type or buffer), ddt.ErrNotCommitted, ErrDeclined, ddt.ErrBounds,
// ddt.ErrOverflow, ErrClosed.
func (t Typed) Check() (int64, error) {
	if t.Type == nil {
		return 0, fmt.Errorf("gpu: typed data without a type: %w", errs.ErrInvalid)
	}
	if !t.Buf.ok() {
		return 0, errNoBuffer
	}
	p, err := PlanOf(t.Type)
	if err != nil {
		return 0, err
	}
	t.Buf.d.mu.Lock()
	defer t.Buf.d.mu.Unlock()
	if err := t.Buf.span("typed buffer", 0, 0); err != nil {
		return 0, err
	}
	return p.window(t.Buf.n, t.Base, t.Count, 0, 1<<62)
}
