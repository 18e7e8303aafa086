package gpu

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
)

// asyncPipeline packs the stream of count elements of ty in a device
// buffer into a ring of two mapped host segments with PackAsync, every
// segment enqueued before the previous one is waited for, then unpacks
// the segments back with UnpackAsync into a second device buffer, and
// checks both byte for byte against ddttest's reference, with guard bytes
// around every segment and around the typed data.
func asyncPipeline(t *testing.T, d *Device, ty *ddt.Type, count int, seg int64) {
	t.Helper()
	const g = 64
	ctx := context.Background()
	n, base := ddttest.Layout(ty, count)
	host := make([]byte, int64(n)+2*g)
	for i := range host {
		host[i] = byte(i*7 + 3)
	}
	src, err := d.Alloc(int64(len(host)))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free()
	src.Write(0, host)
	want := ddttest.Pack(ty, host[g:g+int64(n)], base, count)
	total := int64(len(want))
	ring, err := d.AllocHost(2 * (seg + 2*g))
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Free()
	slot := func(i int) int64 { return int64(i%2)*(seg+2*g) + g }
	for i := range ring.Bytes() {
		ring.Bytes()[i] = 0xA5
	}
	got := make([]byte, 0, total)
	var pending []*Event
	var offs []int64
	for from := int64(0); from < total || len(pending) > 0; {
		for len(pending) < 2 && from < total {
			ev, err := d.PackAsync(ctx, ring, slot(len(offs)), Typed{Type: ty, Buf: src, Base: base + g, Count: count}, from, seg)
			if err != nil {
				t.Fatal(err)
			}
			pending, offs = append(pending, ev), append(offs, from)
			from += ev.Len()
		}
		ev := pending[0]
		if err := ev.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		s := slot(len(offs) - len(pending))
		got = append(got, ring.Bytes()[s:s+ev.Len()]...)
		pending = pending[1:]
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%v: async packed stream differs", ty)
	}
	for i := 0; i < 2; i++ {
		s := slot(i)
		for _, b := range ring.Bytes()[s-g : s] {
			if b != 0xA5 {
				t.Fatalf("%v: PackAsync wrote before its segment", ty)
			}
		}
	}
	// Unpack the stream segment by segment into a fresh buffer.
	fill := bytes.Repeat([]byte{0x5A}, len(host))
	dst, err := d.Alloc(int64(len(host)))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Free()
	dst.Write(0, fill)
	for from := int64(0); from < total; {
		k := min(seg, total-from)
		copy(ring.Bytes()[slot(0):], want[from:from+k])
		ev, err := d.UnpackAsync(ctx, Typed{Type: ty, Buf: dst, Base: base + g, Count: count}, ring, slot(0), from, k)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = ev.Wait(wctx) // polled: a context that can end
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		from += k
	}
	out := make([]byte, len(host))
	dst.Read(0, out)
	ref := append(append(fill[:g:g], ddttest.UnpackRange(ty, fill[g:g+int64(n)], want, base, count, 0)...), fill[g+int64(n):]...)
	if !bytes.Equal(out, ref) {
		t.Fatalf("%v: async unpack differs (or wrote outside the type)", ty)
	}
}

// TestOpenCLAsync runs pipelined PackAsync/UnpackAsync on pocl, and checks
// that the launches really went through the runtime's events.
func TestOpenCLAsync(t *testing.T) {
	d := openCL(t)
	vec := committed(t, must(ddt.Vector(300, 3, 5, ddt.Int32)))
	st := committed(t, must(ddt.Resized(must(ddt.Struct([]int{1, 3}, []int64{0, 12}, []*ddt.Type{ddt.Float64, ddt.Int16})), 0, 24)))
	for _, c := range []struct {
		ty    *ddt.Type
		count int
		seg   int64
	}{{vec, 2, 1000}, {vec, 1, 1 << 20}, {st, 100, 256}} {
		asyncPipeline(t, d, c.ty, c.count, c.seg)
	}
	if st := d.Stats(); st.Async == 0 {
		t.Fatalf("no asynchronous launch: %+v", st)
	}
}

// TestOpenCLPackBytes packs into and unpacks from ordinary Go memory
// through the device's staging buffer, in windows, with guard bytes.
func TestOpenCLPackBytes(t *testing.T) {
	d := openCL(t)
	ctx := context.Background()
	ty := committed(t, must(ddt.Vector(1000, 2, 3, ddt.Float64))) // 16000 packed bytes
	n, base := ddttest.Layout(ty, 90)                             // 1.4 MB: more than one staging buffer
	host := make([]byte, n)
	for i := range host {
		host[i] = byte(i * 13)
	}
	src, err := d.Alloc(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free()
	src.Write(0, host)
	want := ddttest.Pack(ty, host, base, 90)
	got := bytes.Repeat([]byte{0xEE}, len(want)+16)
	if m, err := d.PackBytes(ctx, got[8:8+len(want)-100], Typed{Type: ty, Buf: src, Base: base, Count: 90}, 100); err != nil || m != int64(len(want)-100) {
		t.Fatalf("PackBytes = %d, %v", m, err)
	}
	if !bytes.Equal(got[8:8+len(want)-100], want[100:]) || got[7] != 0xEE || got[8+len(want)-100] != 0xEE {
		t.Fatal("PackBytes: bytes differ or guard overwritten")
	}
	if err := src.Write(0, make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if m, err := d.UnpackBytes(ctx, Typed{Type: ty, Buf: src, Base: base, Count: 90}, want, 0); err != nil || m != int64(len(want)) {
		t.Fatalf("UnpackBytes = %d, %v", m, err)
	}
	out := make([]byte, n)
	src.Read(0, out)
	ref := ddttest.UnpackRange(ty, make([]byte, n), want, base, 90, 0)
	if !bytes.Equal(out, ref) {
		t.Fatal("UnpackBytes: bytes differ")
	}
}
