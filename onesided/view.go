package onesided

import (
	"fmt"
	"unsafe"
)

// Elem is an element type a window, heap object or pipeline buffer can be
// viewed as.
type Elem interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// ViewBytes returns b as a slice of T sharing b's memory, so a caller reads
// and writes elements without package unsafe. It fails with ErrInvalid when
// b does not start on a T boundary or its length is not a multiple of T's
// size. A nil or empty b gives a nil slice.
func ViewBytes[T Elem](b []byte) ([]T, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(b) == 0 {
		return nil, nil
	}
	if len(b)%size != 0 {
		return nil, fmt.Errorf("onesided: view of %d bytes as %T: not a multiple of %d bytes: %w", len(b), zero, size, ErrInvalid)
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%unsafe.Alignof(zero) != 0 {
		return nil, fmt.Errorf("onesided: view as %T: memory at %#x is not %d-byte aligned: %w", zero, uintptr(p), unsafe.Alignof(zero), ErrInvalid)
	}
	return unsafe.Slice((*T)(p), len(b)/size), nil
}

// View returns this rank's region of w (Window.Bytes) as a slice of T. The
// view is valid until Free. Reads of elements that other ranks write
// concurrently need the same synchronisation as reads of Bytes (a signal,
// Fence).
func View[T Elem](w *Window) ([]T, error) {
	if err := w.check("View", w.Rank(), 0, 0); err != nil {
		return nil, err
	}
	return ViewBytes[T](w.Bytes())
}

// SharedView returns target's region of w as a slice of T: Window.Shared
// viewed as ViewBytes does, with the same rules.
func SharedView[T Elem](w *Window, target int) ([]T, error) {
	b, err := w.Shared(target)
	if err != nil {
		return nil, err
	}
	return ViewBytes[T](b)
}

// LocalView returns this rank's copy of the heap object s (Heap.Local) as a
// slice of T. It fails with ErrInvalid when s is not an allocated object of
// h or its offset or size does not fit T.
func LocalView[T Elem](h *Heap, s Sym) ([]T, error) {
	if _, err := h.at("LocalView", s, 0, 0); err != nil {
		return nil, err
	}
	return ViewBytes[T](h.Local(s))
}
