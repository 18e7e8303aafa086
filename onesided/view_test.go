package onesided

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestViews: a window's region and a heap object read and written as
// []float64 without unsafe in the caller, and refusals of misaligned or
// ragged memory, foreign symbols and freed windows.
func TestViews(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g := newMemWorld(1)[0]
	w, err := Allocate(ctx, g, 64)
	if err != nil {
		t.Fatal(err)
	}
	v, err := View[float64](w)
	if err != nil || len(v) != 8 {
		t.Fatalf("View[float64] = %d elements, %v; want 8", len(v), err)
	}
	v[3] = 2.5
	var got [8]byte
	if err := w.Get(0, 24, got[:]); err != nil {
		t.Fatal(err)
	}
	if err := w.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if f, _ := ViewBytes[float64](got[:]); f == nil || f[0] != 2.5 {
		t.Fatalf("Get through the window read %v, want 2.5", got)
	}
	b := w.Bytes()
	if _, err := ViewBytes[float64](b[:12]); !errors.Is(err, ErrInvalid) {
		t.Errorf("ragged length: %v, want ErrInvalid", err)
	}
	if _, err := ViewBytes[float64](b[4:12]); !errors.Is(err, ErrInvalid) {
		t.Errorf("misaligned start: %v, want ErrInvalid", err)
	}
	if s, err := ViewBytes[int32](b[4:12]); err != nil || len(s) != 2 {
		t.Errorf("int32 view at offset 4: %d, %v", len(s), err)
	}
	if err := w.Free(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := View[float64](w); !errors.Is(err, ErrClosed) {
		t.Errorf("View of a freed window: %v, want ErrClosed", err)
	}
	if _, err := View[float64](nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("View of nil: %v, want ErrInvalid", err)
	}

	h, err := NewHeap(ctx, newMemWorld(1)[0], 1<<12)
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Alloc(ctx, 32, 8)
	if err != nil {
		t.Fatal(err)
	}
	f, err := LocalView[float64](h, s)
	if err != nil || len(f) != 4 {
		t.Fatalf("LocalView = %d, %v; want 4", len(f), err)
	}
	f[1] = -1
	if u, _ := LocalView[uint64](h, s); u[1] != 0xbff0000000000000 {
		t.Errorf("element 1 as bits %#x, want -1.0's", u[1])
	}
	if _, err := LocalView[float64](h, Sym{Off: s.Off + 8, Size: 8}); !errors.Is(err, ErrInvalid) {
		t.Errorf("foreign symbol: %v, want ErrInvalid", err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
