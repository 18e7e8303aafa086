package shmring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"github.com/weft-hpc/weft/errs"
)

// alignedMem returns n zero bytes starting on a cell boundary.
func alignedMem(n int) []byte {
	b := make([]byte, n+CellSize)
	off := (CellSize - int(uintptr(unsafe.Pointer(&b[0]))%CellSize)) % CellSize
	return b[off : off+n : off+n]
}

// pattern fills a payload of n bytes that depends on id and n.
func pattern(id uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(id*131 + uint64(i)*7 + uint64(n))
	}
	return b
}

func newRing(t testing.TB, cells, maxInline int) ([]byte, *Producer, *Consumer) {
	t.Helper()
	mem := alignedMem(Layout(cells))
	if err := Init(mem, cells, maxInline); err != nil {
		t.Fatal(err)
	}
	pr, err := NewProducer(mem)
	if err != nil {
		t.Fatal(err)
	}
	co, err := NewConsumer(mem)
	if err != nil {
		t.Fatal(err)
	}
	return mem, pr, co
}

func mustSend(t *testing.T, pr *Producer, user uint64, b []byte) {
	t.Helper()
	ok, err := pr.TrySend(user, b)
	if err != nil || !ok {
		t.Fatalf("TrySend(%d, %d bytes) = %v, %v", user, len(b), ok, err)
	}
}

func mustRecv(t *testing.T, co *Consumer, user uint64, want []byte) {
	t.Helper()
	buf := make([]byte, co.MaxInline()+1)
	u, n, ok, err := co.TryRecv(buf)
	if err != nil || !ok {
		t.Fatalf("TryRecv = %v, %v; want message %d", ok, err, user)
	}
	if u != user || n != len(want) || !bytes.Equal(buf[:n], want) {
		t.Fatalf("got user %d, %d bytes %x; want user %d, %d bytes %x", u, n, buf[:n], user, len(want), want)
	}
}

func mustEmpty(t *testing.T, co *Consumer) {
	t.Helper()
	if _, n, ok, err := co.TryRecv(make([]byte, 8)); ok || err != nil {
		t.Fatalf("TryRecv on an empty ring = %d bytes, %v, %v", n, ok, err)
	}
}

func TestCellsFor(t *testing.T) {
	for _, c := range []struct{ n, k int }{{0, 1}, {40, 1}, {41, 2}, {96, 2}, {97, 3}, {152, 3}, {153, 4}} {
		if k := CellsFor(c.n); k != c.k {
			t.Errorf("CellsFor(%d) = %d, want %d", c.n, k, c.k)
		}
	}
	if m := MaxInlineFor(16); CellsFor(m) != 8 || CellsFor(m+1) != 9 {
		t.Errorf("MaxInlineFor(16) = %d takes %d cells", m, CellsFor(m))
	}
}

func TestInitErrors(t *testing.T) {
	for _, cells := range []int{-1, 0, 1, 3, 48, MaxCells * 2} {
		if Layout(cells) != -1 {
			t.Errorf("Layout(%d) = %d, want -1", cells, Layout(cells))
		}
		if err := Init(alignedMem(4096), cells, 0); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Init with %d cells: %v, want ErrInvalid", cells, err)
		}
	}
	mem := alignedMem(Layout(16) + CellSize)
	for _, c := range []struct {
		name      string
		mem       []byte
		maxInline int
	}{
		{"nil", nil, 0},
		{"short", mem[:Layout(16)-1], 0},
		{"misaligned", mem[8 : 8+Layout(16)], 0},
		{"max inline negative", mem, -1},
		{"max inline too large", mem, MaxInlineFor(16) + 1},
	} {
		if err := Init(c.mem, 16, c.maxInline); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Init %s: %v, want ErrInvalid", c.name, err)
		}
	}
	if err := Init(mem, 16, MaxInlineFor(16)); err != nil {
		t.Errorf("Init at the largest max inline: %v", err)
	}
}

// TestEverySize sends and receives every size from 0 to the maximum, and
// checks that one byte more is refused without touching the ring.
func TestEverySize(t *testing.T) {
	const max = 1000
	_, pr, co := newRing(t, 64, max)
	for n := 0; n <= max; n++ {
		mustSend(t, pr, uint64(n), pattern(uint64(n), n))
		mustRecv(t, co, uint64(n), pattern(uint64(n), n))
	}
	ok, err := pr.TrySend(1, make([]byte, max+1))
	if ok || !errors.Is(err, ErrTooLarge) || !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("TrySend of max+1 bytes = %v, %v; want ErrTooLarge", ok, err)
	}
	if n, err := pr.TrySendv([]uint64{1, 2}, [][]byte{nil, make([]byte, max+1)}); n != 0 || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("TrySendv with a max+1 message = %d, %v; want 0, ErrTooLarge", n, err)
	}
	mustEmpty(t, co)
	mustSend(t, pr, 7, pattern(7, max))
	mustRecv(t, co, 7, pattern(7, max))
}

// TestWrapAround runs messages of mixed sizes through a small ring for many
// laps, several in flight, so messages of every cell count start at every
// cell and span the wrap point.
func TestWrapAround(t *testing.T) {
	const cells = 16
	max := MaxInlineFor(cells)
	_, pr, co := newRing(t, cells, max)
	sent, recvd := uint64(0), uint64(0)
	size := func(id uint64) int { return int(id*37) % (max + 1) }
	wrapped := 0
	for recvd < 5000 {
		for {
			p := pr.write
			ok, err := pr.TrySend(sent, pattern(sent, size(sent)))
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if k := CellsFor(size(sent)); k > 1 && p&(cells-1)+uint64(k) > cells {
				wrapped++
			}
			sent++
		}
		// Receive about half of what is in flight.
		for stop := recvd + (sent-recvd+1)/2; recvd < stop; recvd++ {
			mustRecv(t, co, recvd, pattern(recvd, size(recvd)))
		}
	}
	if wrapped < 100 {
		t.Fatalf("only %d multi-cell messages crossed the wrap point", wrapped)
	}
	for ; recvd < sent; recvd++ {
		mustRecv(t, co, recvd, pattern(recvd, size(recvd)))
	}
	mustEmpty(t, co)
}

// TestMultiCellAcrossWrap puts a three-cell message on the last cell.
func TestMultiCellAcrossWrap(t *testing.T) {
	const cells = 8
	_, pr, co := newRing(t, cells, MaxInlineFor(cells))
	for i := range cells - 1 {
		mustSend(t, pr, uint64(i), []byte{byte(i)})
		mustRecv(t, co, uint64(i), []byte{byte(i)})
	}
	big := pattern(99, FirstPayload+NextPayload+1) // three cells: 7, 0, 1
	mustSend(t, pr, 99, big)
	mustRecv(t, co, 99, big)
	if pr.write != cells+2 || co.read != cells+2 {
		t.Fatalf("positions %d, %d after the wrap, want %d", pr.write, co.read, cells+2)
	}
}

func TestFull(t *testing.T) {
	const cells = 8
	_, pr, co := newRing(t, cells, MaxInlineFor(cells))
	for i := range cells {
		mustSend(t, pr, uint64(i), []byte{byte(i)})
	}
	if ok, err := pr.TrySend(100, nil); ok || err != nil {
		t.Fatalf("TrySend on a full ring = %v, %v", ok, err)
	}
	if n, err := pr.TrySendv([]uint64{100}, [][]byte{nil}); n != 0 || err != nil {
		t.Fatalf("TrySendv on a full ring = %d, %v", n, err)
	}
	mustRecv(t, co, 0, []byte{0})
	// One cell free: a two-cell message does not fit, a one-cell one does.
	if ok, err := pr.TrySend(100, make([]byte, FirstPayload+1)); ok || err != nil {
		t.Fatalf("two-cell TrySend with one cell free = %v, %v", ok, err)
	}
	mustSend(t, pr, 8, []byte{8})
	for i := 1; i <= cells; i++ {
		mustRecv(t, co, uint64(i), []byte{byte(i)})
	}
	mustEmpty(t, co)
}

func TestTruncation(t *testing.T) {
	_, pr, co := newRing(t, 64, 500)
	msg := pattern(1, 300)
	mustSend(t, pr, 1, msg)
	mustSend(t, pr, 2, msg[:10])
	mustSend(t, pr, 3, msg[:50])
	buf := make([]byte, 100)
	u, n, ok, err := co.TryRecv(buf)
	if !ok || u != 1 || n != 300 || !errors.Is(err, ErrTruncated) || !bytes.Equal(buf, msg[:100]) {
		t.Fatalf("truncated TryRecv = %d, %d, %v, %v", u, n, ok, err)
	}
	if u, n, ok, err := co.TryRecv(nil); !ok || u != 2 || n != 10 || !errors.Is(err, ErrTruncated) {
		t.Fatalf("TryRecv into nil = %d, %d, %v, %v", u, n, ok, err)
	}
	buf = make([]byte, 45) // ends within the second cell
	if u, n, ok, err := co.TryRecv(buf); !ok || u != 3 || n != 50 || !errors.Is(err, ErrTruncated) || !bytes.Equal(buf, msg[:45]) {
		t.Fatalf("TryRecv of 50 into 45 = %d, %d, %v, %v", u, n, ok, err)
	}
	mustEmpty(t, co)
}

func TestPeek(t *testing.T) {
	_, pr, co := newRing(t, 16, 200)
	if _, _, ok, err := co.Peek(); ok || err != nil {
		t.Fatalf("Peek on an empty ring = %v, %v", ok, err)
	}
	mustSend(t, pr, 42, pattern(42, 77))
	for range 2 {
		if u, n, ok, err := co.Peek(); !ok || err != nil || u != 42 || n != 77 {
			t.Fatalf("Peek = %d, %d, %v, %v", u, n, ok, err)
		}
	}
	mustRecv(t, co, 42, pattern(42, 77))
	if _, _, ok, _ := co.Peek(); ok {
		t.Fatal("Peek sees a consumed message")
	}
}

// TestPeekTake takes messages of one and several cells, whole and
// truncated, across the ring's wrap-around with Peek then Take, and checks
// that the cells come back to the producer.
func TestPeekTake(t *testing.T) {
	_, pr, co := newRing(t, 16, 400)
	for i := range 40 {
		size := []int{8, 0, 56, 57, 300}[i%5]
		msg := pattern(uint64(i), size)
		mustSend(t, pr, uint64(i), msg)
		u, n, ok, err := co.Peek()
		if !ok || err != nil || u != uint64(i) || n != size {
			t.Fatalf("message %d: Peek = %d, %d, %v, %v", i, u, n, ok, err)
		}
		short := i%3 == 2 && size > 0
		buf := make([]byte, size)
		if short {
			buf = buf[:size-1]
		}
		err = co.Take(buf, n)
		if short != errors.Is(err, ErrTruncated) || !short && err != nil {
			t.Fatalf("message %d of %d bytes into %d: Take = %v", i, size, len(buf), err)
		}
		if !bytes.Equal(buf, msg[:len(buf)]) {
			t.Fatalf("message %d: took %x, want %x", i, buf, msg[:len(buf)])
		}
		mustEmpty(t, co)
	}
}

func TestBatch(t *testing.T) {
	const cells = 16
	_, pr, co := newRing(t, cells, MaxInlineFor(cells))
	users := []uint64{1, 2, 3, 4, 5}
	sizes := []int{0, 8, 100, 40, 200} // 1+1+3+1+4 cells
	var payloads [][]byte
	for i, u := range users {
		payloads = append(payloads, pattern(u, sizes[i]))
	}
	if n, err := pr.TrySendv(users, payloads); n != 5 || err != nil {
		t.Fatalf("TrySendv = %d, %v", n, err)
	}
	// 10 cells used: of the next five, the first four fit (1+1+3+1 cells).
	if n, err := pr.TrySendv(users, payloads); n != 4 || err != nil {
		t.Fatalf("TrySendv on a nearly full ring = %d, %v; want 4", n, err)
	}
	for i, u := range users {
		mustRecv(t, co, u, payloads[i])
	}
	for i, u := range users[:4] {
		mustRecv(t, co, u, payloads[i])
	}
	mustEmpty(t, co)
	if n, err := pr.TrySendv(users[:2], payloads); n != 0 || !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("TrySendv with mismatched slices = %d, %v", n, err)
	}
	if n, err := pr.TrySendv(nil, nil); n != 0 || err != nil {
		t.Fatalf("empty TrySendv = %d, %v", n, err)
	}
}

// TestCrashMidMessage writes messages the way the producer does but stops
// before the publishing store, as a producer that dies there would: the
// consumer must deliver nothing, and a new producer takes over the
// position.
func TestCrashMidMessage(t *testing.T) {
	const cells = 16
	mem, pr, co := newRing(t, cells, MaxInlineFor(cells))
	mustSend(t, pr, 1, pattern(1, 10))
	// A multi-cell message, every cell written but the first sequence word.
	pr.fill(pr.write, 2, 0, pattern(2, 150), false)
	mustRecv(t, co, 1, pattern(1, 10))
	mustEmpty(t, co)
	if _, _, ok, _ := co.Peek(); ok {
		t.Fatal("Peek sees an unpublished message")
	}
	// A batch cut short: later messages complete with their sequence words,
	// the first one's never stored.
	p := pr.write
	p += uint64(pr.fill(p, 3, 0, pattern(3, 60), false))
	pr.fill(p, 4, 0, pattern(4, 5), true)
	mustEmpty(t, co)

	pr2, err := NewProducer(mem)
	if err != nil {
		t.Fatal(err)
	}
	if pr2.write != pr.write {
		t.Fatalf("new producer at %d, want %d", pr2.write, pr.write)
	}
	// Shorter messages now end where the dead producer's cells began and
	// where its unpublished batch message 4 starts: neither may show.
	mustSend(t, pr2, 5, pattern(5, 3))
	mustSend(t, pr2, 6, pattern(6, 4))
	mustRecv(t, co, 5, pattern(5, 3))
	mustRecv(t, co, 6, pattern(6, 4))
	mustEmpty(t, co)
	mustSend(t, pr2, 7, pattern(7, 100))
	mustRecv(t, co, 7, pattern(7, 100))
	mustEmpty(t, co)
}

// TestReattach: either end may attach again between messages and goes on
// where the previous one stopped.
func TestReattach(t *testing.T) {
	const cells = 8
	mem, pr, co := newRing(t, cells, MaxInlineFor(cells))
	for i := range 20 {
		mustSend(t, pr, uint64(i), pattern(uint64(i), i*10))
		if i%3 == 0 {
			mustRecv(t, co, uint64(i), pattern(uint64(i), i*10))
			continue
		}
		var err error
		if pr, err = NewProducer(mem); err != nil {
			t.Fatal(err)
		}
		if co, err = NewConsumer(mem); err != nil {
			t.Fatal(err)
		}
		mustRecv(t, co, uint64(i), pattern(uint64(i), i*10))
	}
	// Attaching to a full ring.
	for i := range cells {
		mustSend(t, pr, uint64(i), nil)
	}
	pr, err := NewProducer(mem)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := pr.TrySend(9, nil); ok || err != nil {
		t.Fatalf("TrySend after attaching to a full ring = %v, %v", ok, err)
	}
}

func TestBadRegions(t *testing.T) {
	const cells = 16
	good := alignedMem(Layout(cells) + CellSize)
	if err := Init(good, cells, 100); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m []byte)) []byte {
		m := alignedMem(len(good))
		copy(m, good)
		f(m)
		return m
	}
	for _, c := range []struct {
		name string
		mem  []byte
	}{
		{"nil", nil},
		{"header only", good[:CellSize]},
		{"zeroed", alignedMem(Layout(cells))},
		{"misaligned", good[8:]},
		{"short", good[:Layout(cells)-1]},
		{"bad magic", edit(func(m []byte) { m[0] ^= 1 })},
		{"bad version", edit(func(m []byte) { binary.LittleEndian.PutUint32(m[8:], 2) })},
		{"bad cell size", edit(func(m []byte) { binary.LittleEndian.PutUint32(m[12:], 128) })},
		{"cells not a power of two", edit(func(m []byte) { binary.LittleEndian.PutUint32(m[16:], 12) })},
		{"cells zero", edit(func(m []byte) { binary.LittleEndian.PutUint32(m[16:], 0) })},
		{"cells past the region", edit(func(m []byte) { binary.LittleEndian.PutUint32(m[16:], 1<<20) })},
		{"max inline too large", edit(func(m []byte) { binary.LittleEndian.PutUint32(m[20:], 1<<31) })},
	} {
		if _, err := NewProducer(c.mem); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("NewProducer %s: %v, want ErrInvalid", c.name, err)
		}
		if _, err := NewConsumer(c.mem); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("NewConsumer %s: %v, want ErrInvalid", c.name, err)
		}
	}
	// A published message whose length is past the maximum.
	mem, pr, co := newRing(t, cells, 100)
	mustSend(t, pr, 1, pattern(1, 10))
	binary.LittleEndian.PutUint32(mem[headerBytes+16:], 101)
	if _, _, ok, err := co.TryRecv(make([]byte, 200)); ok || !errors.Is(err, ErrCorrupt) {
		t.Errorf("TryRecv of a corrupt message = %v, %v; want ErrCorrupt", ok, err)
	}
	if _, _, ok, err := co.Peek(); ok || !errors.Is(err, ErrCorrupt) {
		t.Errorf("Peek of a corrupt message = %v, %v; want ErrCorrupt", ok, err)
	}
	if _, err := NewProducer(mem); !errors.Is(err, ErrCorrupt) {
		t.Errorf("NewProducer over a corrupt message: %v, want ErrCorrupt", err)
	}
}

// TestTryRecvFunc: the pieces a message is handed over in cover its
// payload exactly, in order, for lengths around every cell boundary.
func TestTryRecvFunc(t *testing.T) {
	const cells = 64
	mem := alignedMem(Layout(cells))
	if err := Init(mem, cells, MaxInlineFor(cells)); err != nil {
		t.Fatal(err)
	}
	pr, err := NewProducer(mem)
	if err != nil {
		t.Fatal(err)
	}
	co, err := NewConsumer(mem)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 39, 40, 41, 95, 96, 97, 152, 153, 1000, MaxInlineFor(cells)} {
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(i*7 + n)
		}
		if ok, err := pr.TrySend(uint64(n)+1, msg); !ok || err != nil {
			t.Fatalf("send %d: %v %v", n, ok, err)
		}
		got := make([]byte, 0, n)
		user, m, ok, err := co.TryRecvFunc(func(off int, piece []byte) {
			if off != len(got) {
				t.Fatalf("%d bytes: piece at %d after %d bytes", n, off, len(got))
			}
			got = append(got, piece...)
		})
		if !ok || err != nil || user != uint64(n)+1 || m != n || !bytes.Equal(got, msg) {
			t.Fatalf("%d bytes: user %d len %d ok %v err %v, payload equal %v", n, user, m, ok, err, bytes.Equal(got, msg))
		}
	}
	if _, _, ok, _ := co.TryRecvFunc(func(int, []byte) { t.Fatal("called on an empty ring") }); ok {
		t.Fatal("empty ring gave a message")
	}
}

// TestTrySendFunc: a message filled piece by piece arrives as the same
// bytes TrySend would have sent, around every cell boundary; a full ring
// refuses without calling fill.
func TestTrySendFunc(t *testing.T) {
	const cells = 64
	mem := alignedMem(Layout(cells))
	if err := Init(mem, cells, MaxInlineFor(cells)); err != nil {
		t.Fatal(err)
	}
	pr, err := NewProducer(mem)
	if err != nil {
		t.Fatal(err)
	}
	co, err := NewConsumer(mem)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 39, 40, 41, 95, 96, 97, 1000, MaxInlineFor(cells)} {
		msg := pattern(uint64(n), n)
		next := 0
		ok, err := pr.TrySendFunc(7, n, func(off int, piece []byte) {
			if off != next {
				t.Fatalf("%d bytes: piece at %d, want %d", n, off, next)
			}
			next += copy(piece, msg[off:])
		})
		if !ok || err != nil || next != n {
			t.Fatalf("%d bytes: %v %v, filled %d", n, ok, err, next)
		}
		buf := make([]byte, n)
		if user, m, ok, err := co.TryRecv(buf); !ok || err != nil || user != 7 || m != n || !bytes.Equal(buf, msg) {
			t.Fatalf("%d bytes: received %v %v %d %d, equal %v", n, ok, err, user, m, bytes.Equal(buf, msg))
		}
	}
	for { // fill the ring
		if ok, _ := pr.TrySend(1, make([]byte, 200)); !ok {
			break
		}
	}
	if ok, err := pr.TrySendFunc(1, 200, func(int, []byte) { t.Fatal("fill called on a full ring") }); ok || err != nil {
		t.Fatalf("full ring: %v %v", ok, err)
	}
	if _, err := pr.TrySendFunc(1, MaxInlineFor(cells)+1, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}

// TestAppendPublish: appended messages stay invisible until Publish (or a
// TrySend, TrySendFunc or TrySendv, which publish them with their own),
// then arrive in order; a full ring refuses Append without writing; an
// unpublished batch left by a dead producer never shows.
func TestAppendPublish(t *testing.T) {
	const cells = 16
	mem, pr, co := newRing(t, cells, MaxInlineFor(cells))
	if pr.Pending() {
		t.Fatal("new producer has pending messages")
	}
	pr.Publish() // nothing pending: no effect
	mustEmpty(t, co)
	for i := range 3 {
		if ok, err := pr.Append(uint64(i), pattern(uint64(i), 30*i)); !ok || err != nil {
			t.Fatalf("Append %d = %v, %v", i, ok, err)
		}
		mustEmpty(t, co)
	}
	if !pr.Pending() {
		t.Fatal("Pending false after Append")
	}
	pr.Publish()
	if pr.Pending() {
		t.Fatal("Pending true after Publish")
	}
	for i := range 3 {
		mustRecv(t, co, uint64(i), pattern(uint64(i), 30*i))
	}
	mustEmpty(t, co)

	// Each kind of send publishes what was appended before it.
	sends := map[string]func(u uint64, b []byte){
		"TrySend": func(u uint64, b []byte) { mustSend(t, pr, u, b) },
		"TrySendv": func(u uint64, b []byte) {
			if n, err := pr.TrySendv([]uint64{u}, [][]byte{b}); n != 1 || err != nil {
				t.Fatalf("TrySendv = %d, %v", n, err)
			}
		},
		"TrySendFunc": func(u uint64, b []byte) {
			if ok, err := pr.TrySendFunc(u, len(b), func(off int, p []byte) { copy(p, b[off:]) }); !ok || err != nil {
				t.Fatalf("TrySendFunc = %v, %v", ok, err)
			}
		},
	}
	for name, send := range sends {
		if ok, err := pr.Append(10, pattern(10, 70)); !ok || err != nil {
			t.Fatalf("%s: Append = %v, %v", name, ok, err)
		}
		send(11, pattern(11, 90))
		if pr.Pending() {
			t.Fatalf("%s left messages pending", name)
		}
		mustRecv(t, co, 10, pattern(10, 70))
		mustRecv(t, co, 11, pattern(11, 90))
		mustEmpty(t, co)
	}

	// A full ring of appended messages: Append refuses without writing;
	// nothing is visible until Publish.
	n := 0
	for {
		ok, err := pr.Append(uint64(100+n), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		n++
	}
	if n != cells {
		t.Fatalf("appended %d one-cell messages into %d cells", n, cells)
	}
	mustEmpty(t, co)
	pr.Publish()
	for i := range n {
		mustRecv(t, co, uint64(100+i), nil)
	}
	mustEmpty(t, co)
	if _, err := pr.Append(1, make([]byte, pr.MaxInline()+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Append past MaxInline: %v", err)
	}

	// A producer that dies with appended messages: none shows, and the
	// next producer writes over them.
	for i := range 3 {
		if ok, _ := pr.Append(uint64(200+i), pattern(uint64(200+i), 60)); !ok {
			t.Fatal("Append refused")
		}
	}
	pr2, err := NewProducer(mem)
	if err != nil {
		t.Fatal(err)
	}
	mustEmpty(t, co)
	mustSend(t, pr2, 300, pattern(300, 5))
	mustRecv(t, co, 300, pattern(300, 5))
	mustEmpty(t, co)
}

// TestAux: the aux word travels with its message, a message sent without
// one reads 0, and a cell reused after the ring wrapped does not keep an
// old word.
func TestAux(t *testing.T) {
	_, pr, co := newRing(t, 8, MaxInlineFor(8))
	for round := 0; round < 6; round++ {
		if ok, err := pr.TrySendAux(7, uint32(0xa0+round), pattern(1, 50)); !ok || err != nil {
			t.Fatalf("TrySendAux: %v %v", ok, err)
		}
		mustSend(t, pr, 8, pattern(2, 10))
		if _, _, ok, _ := co.Peek(); !ok || co.Aux() != uint32(0xa0+round) {
			t.Fatalf("round %d: aux %#x, want %#x", round, co.Aux(), 0xa0+round)
		}
		mustRecv(t, co, 7, pattern(1, 50))
		if _, _, ok, _ := co.Peek(); !ok || co.Aux() != 0 {
			t.Fatalf("round %d: aux %#x of a message sent without, want 0", round, co.Aux())
		}
		mustRecv(t, co, 8, pattern(2, 10))
	}
}

// TestBulkEveryOffset: messages of bulkCells cells and more are laid out in
// the producer's scratch and copied into the ring at once when they do
// not wrap. Every such size class starts at every cell, alone, appended
// two at a time and in batches of two, so that messages are written both
// ways, first and not first of what one store publishes.
func TestBulkEveryOffset(t *testing.T) {
	const cells = 32
	max := MaxInlineFor(cells)
	_, pr, co := newRing(t, cells, max)
	id := uint64(0)
	for n := FirstPayload + (bulkCells-2)*NextPayload + 1; n <= max; n += NextPayload/2 + 1 {
		for off := 0; off < cells; off++ {
			for pr.write%cells != uint64(off) { // move to the cell
				mustSend(t, pr, id, nil)
				mustRecv(t, co, id, nil)
				id++
			}
			a, b := pattern(id, n), pattern(id+1, n/2+FirstPayload+NextPayload)
			switch off % 3 {
			case 0:
				mustSend(t, pr, id, a)
			case 1:
				if ok, err := pr.Append(id, a); !ok || err != nil {
					t.Fatalf("Append of %d bytes at cell %d: %v, %v", n, off, ok, err)
				}
				if ok, err := pr.Append(id+1, b); ok && err == nil {
					pr.Publish()
					mustRecv(t, co, id, a)
					mustRecv(t, co, id+1, b)
					id += 2
					continue
				}
				pr.Publish()
			case 2:
				if k, err := pr.TrySendv([]uint64{id, id + 1}, [][]byte{a, b}); err != nil || k == 0 {
					t.Fatalf("TrySendv of %d bytes at cell %d: %d, %v", n, off, k, err)
				} else if k == 2 {
					mustRecv(t, co, id, a)
					mustRecv(t, co, id+1, b)
					id += 2
					continue
				}
			}
			mustRecv(t, co, id, a)
			id++
			mustEmpty(t, co)
		}
	}
}
