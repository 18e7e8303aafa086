package onesided

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/internal/devhook"
)

// PutDevice is PutTyped with the origin in GPU memory: origin.Count
// elements of origin.Type in origin.Buf (package gpu) are stored as
// targetCount elements of targetType starting at offset in target's
// region. For a libfabric peer the device's pack kernels write the stream
// straight into the window's registered 64 KiB chunk buffers, mapped into
// the device: the kernels of all free chunks are started together, and
// each chunk is written as soon as its kernel has completed. For a
// direct-store peer the stream goes through the device's staging buffer
// into the target's layout. As with Put, the transfer is
// complete at the target after the next flush; origin may be reused when
// PutDevice returns. Errors: PutTyped's, and gpu's (gpu.ErrDeclined for a
// type without a GPU kernel).
func (w *Window) PutDevice(target, offset int, origin gpu.Typed, targetCount int, targetType *ddt.Type) error {
	return w.devTyped(context.Background(), "PutDevice", target, offset, origin, targetCount, targetType, false)
}

// GetDevice is GetTyped with the origin in GPU memory: targetCount
// elements of targetType at offset in target's region are read, a chunk
// at a time, and unpacked by the device's unpack kernel into origin (for
// a libfabric peer, a kernel per chunk started as its reads complete,
// while the next chunk's reads are in flight). It returns once origin
// holds the data.
func (w *Window) GetDevice(ctx context.Context, target, offset int, origin gpu.Typed, targetCount int, targetType *ddt.Type) error {
	defer w.after(w.during(ctx))
	return w.devTyped(ctx, "GetDevice", target, offset, origin, targetCount, targetType, true)
}

func (w *Window) devTyped(ctx context.Context, op string, target, offset int, origin gpu.Typed,
	targetCount int, targetType *ddt.Type, get bool) error {
	if _, err := origin.Check(); err != nil {
		return fmt.Errorf("onesided: %s: origin: %w", op, err)
	}
	n, err := w.typedPrep(op, target, origin.Count, origin.Type, offset, targetCount, targetType)
	if err != nil || n == 0 {
		return err
	}
	if get {
		w.count(opGet, target, n)
	} else {
		w.count(opPut, target, n)
	}
	defer w.typed.done() // typedSegments' list
	d := origin.Buf.Device()
	f := netFab(w.net)
	// A chunk of the libfabric path is packed into, or unpacked from, in
	// place (the chunk buffers mapped into the device); anything else
	// goes through the device's staging buffer.
	pack := func(b []byte, off int) error {
		var m int64
		var err error
		if mb, at, ok := f.devChunk(d, b); ok {
			m, err = d.Pack(ctx, mb, at, origin, int64(off), int64(len(b)))
		} else {
			m, err = d.PackBytes(ctx, b, origin, int64(off))
		}
		if err != nil || m != int64(len(b)) {
			return fmt.Errorf("onesided: %s: pack origin on %s (%d of %d bytes): %w", op, d, m, len(b), err)
		}
		return nil
	}
	unpack := func(b []byte, off int) error {
		var m int64
		var err error
		if mb, at, ok := f.devChunk(d, b); ok {
			m, err = d.Unpack(ctx, origin, mb, at, int64(off), int64(len(b)))
		} else {
			m, err = d.UnpackBytes(ctx, origin, b, int64(off))
		}
		if err != nil || m != int64(len(b)) {
			return fmt.Errorf("onesided: %s: unpack origin on %s (%d of %d bytes): %w", op, d, m, len(b), err)
		}
		return nil
	}
	if p := w.peers[target]; p != nil {
		if _, err := w.typedSegments(op, target, offset, targetCount, targetType); err != nil {
			return err
		}
		bp := pieces.Get().(*[]byte)
		defer pieces.Put(bp)
		piece := *bp
		for off := 0; off < n; {
			k := min(n-off, len(piece))
			if get {
				if _, err := targetType.PackRange(piece[:k], p, int64(offset), targetCount, int64(off)); err != nil {
					return fmt.Errorf("onesided: %s: %w: %w", op, ErrOutOfRange, err)
				}
				if err := unpack(piece[:k], off); err != nil {
					return err
				}
			} else {
				if err := pack(piece[:k], off); err != nil {
					return err
				}
				if _, err := targetType.UnpackRange(p, piece[:k], int64(offset), targetCount, int64(off)); err != nil {
					return fmt.Errorf("onesided: %s: %w: %w", op, ErrOutOfRange, err)
				}
			}
			off += k
		}
		return nil
	}
	segs, err := w.typedSegments(op, target, offset, targetCount, targetType)
	if err != nil {
		return err
	}
	// The chunks of the libfabric path are packed (Put) by kernels
	// started without waiting, one per free chunk, each waited for before
	// its writes are posted, and unpacked (Get) by kernels started as
	// each chunk's reads complete, waited for before the chunk is reused.
	// Chunks the device cannot reach in place go by sync (pack, unpack).
	async := func(b []byte, off int, sync func([]byte, int) error) (func() error, error) {
		mb, at, ok := f.devChunk(d, b)
		if !ok || devChunkSync.Load() {
			return nil, sync(b, off)
		}
		devChunkAsync.Add(1)
		what := "pack"
		var ev *gpu.Event
		var err error
		if get {
			what = "unpack"
			ev, err = d.UnpackAsync(ctx, origin, mb, at, int64(off), int64(len(b)))
		} else {
			ev, err = d.PackAsync(ctx, mb, at, origin, int64(off), int64(len(b)))
		}
		if err == nil && ev.Len() != int64(len(b)) {
			err = fmt.Errorf("%d of %d bytes: %w", ev.Len(), len(b), ErrOutOfRange)
		}
		if err != nil {
			return nil, fmt.Errorf("onesided: %s: %s origin on %s: %w", op, what, d, err)
		}
		return func() error {
			if err := ev.Wait(ctx); err != nil {
				return fmt.Errorf("onesided: %s: %s origin on %s: %w", op, what, d, err)
			}
			return nil
		}, nil
	}
	if get {
		unpackChunk := func(b []byte, off int) (func() error, error) { return async(b, off, unpack) }
		if err := w.net.typedChunks(ctx, target, offset, segs, n, nil, unpackChunk); err != nil {
			return err
		}
		return w.net.flush(ctx, target)
	}
	packChunk := func(b []byte, off int) (func() error, error) { return async(b, off, pack) }
	return w.net.typedChunks(ctx, target, offset, segs, n, packChunk, nil)
}

// devChunkSync makes PutDevice and GetDevice wait for each chunk's pack
// or unpack before going on (tests and benchmarks compare);
// devChunkAsync counts the packs and unpacks started without waiting.
var (
	devChunkSync  atomic.Bool
	devChunkAsync atomic.Int64
)

// devChunkCopy forces GPU transfers through the device's staging buffer
// instead of the mapped chunk buffers (tests).
var devChunkCopy atomic.Bool

// devChunkStats counts the GPU pieces packed or unpacked through the
// staging buffer [0] and in place in mapped chunk buffers [1].
var devChunkStats [2]atomic.Int64

// devChunk returns the mapping of f's chunk buffers into device d
// (MapHost, made on first use) and the offset of b in them; ok is false
// when b is not in them (a direct-store piece) or d cannot map them. It
// runs inside typedChunks (f's guard held).
func (f *fabPath) devChunk(d *gpu.Device, b []byte) (*gpu.Buffer, int64, bool) {
	if f == nil || f.chunks == nil || len(b) == 0 || devChunkCopy.Load() {
		devChunkStats[0].Add(1)
		return nil, 0, false
	}
	all := f.chunks.Bytes()
	lo, p := uintptr(unsafe.Pointer(unsafe.SliceData(all))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < lo || p+uintptr(len(b)) > lo+uintptr(len(all)) {
		devChunkStats[0].Add(1)
		return nil, 0, false
	}
	f.devMu.Lock()
	m, ok := f.devMaps[d]
	f.devMu.Unlock()
	if !ok {
		var err error
		if m, err = d.MapHost(all); err != nil {
			if errors.Is(err, gpu.ErrClosed) { // the pack or unpack reports it
				devChunkStats[0].Add(1)
				return nil, 0, false
			}
			f.w.log.Debug("cannot map the chunk buffers into the GPU; staging through its buffer", "device", d, "err", err)
			m = nil
		}
		remove, live := devhook.OnClose(d, func() { f.deviceClosed(d) })
		if !live { // closed meanwhile: Close frees the mapping
			devChunkStats[0].Add(1)
			return nil, 0, false
		}
		f.devMu.Lock()
		if f.devMaps == nil {
			f.devMaps = map[*gpu.Device]*gpu.Buffer{}
			f.devHooks = map[*gpu.Device]func(){}
		}
		f.devMaps[d], f.devHooks[d] = m, remove
		f.devMu.Unlock()
	}
	if m == nil {
		devChunkStats[0].Add(1)
		return nil, 0, false
	}
	devChunkStats[1].Add(1)
	return m, int64(p - lo), true
}

// deviceClosed is f's close hook of device d (gpu.Device.Close runs it
// before it frees the device's memory): f forgets d's mapping of its
// chunk buffers, which Close then frees. The chunk buffers themselves are
// f's (libfabric reads and writes them, not the device's memory), and a
// pack or unpack into the mapping holds the device until it returns, so
// nothing on the network refers to memory the device frees; a transfer
// in flight fails at its next piece with gpu.ErrClosed.
func (f *fabPath) deviceClosed(d *gpu.Device) {
	f.devMu.Lock()
	defer f.devMu.Unlock()
	delete(f.devMaps, d)
	delete(f.devHooks, d)
}

// unmapChunks frees the chunk buffers' device mappings (a device closed
// first has freed its own).
func (f *fabPath) unmapChunks() error {
	f.devMu.Lock()
	maps, hooks := f.devMaps, f.devHooks
	f.devMaps, f.devHooks = nil, nil
	f.devMu.Unlock()
	for _, remove := range hooks {
		remove()
	}
	var out []error
	for _, m := range maps {
		if m != nil {
			if err := m.Free(); err != nil && !errors.Is(err, gpu.ErrClosed) {
				out = append(out, err)
			}
		}
	}
	return errors.Join(out...)
}
