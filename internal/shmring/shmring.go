// Package shmring is a single-producer single-consumer ring of 64-byte
// cells in a caller-provided memory region: a /dev/shm or memfd mapping
// shared by two processes of one node, or ordinary memory shared by two
// goroutines of one process. Small messages travel inline in the cells, so
// nothing is registered and nothing is allocated on the hot path.
//
// # Memory layout
//
// A region of Layout(cells) bytes, 64-byte aligned, holds (offsets in
// bytes, every integer little-endian as the machine stores it):
//
//	0    config line (written by Init, read once by each attach)
//	     0  magic      uint64  "weftring"
//	     8  version    uint32
//	     12 cell size  uint32  always 64
//	     16 cells      uint32  a power of two, at least 2
//	     20 max inline uint32  largest payload, in bytes
//	64   read line: the consumer's position (uint64, cells consumed so
//	     far); written only by the consumer, read by the producer only
//	     when the ring looks full (it keeps a cached copy)
//	128  spare line (keeps the read line apart from the cells)
//	192  cells[cells], 64 bytes each
//
// Positions count cells from 0 and never wrap; position p lives in cell
// p mod cells. Every cell starts with a sequence word, p+1 for the cell
// written at position p, so a cell left from an earlier lap (or the zeroes
// of Init) never matches. A message of n bytes at position p takes
// CellsFor(n) consecutive cells (wrapping past the last cell to the first):
//
//	first cell   0 seq uint64 | 8 user uint64 | 16 length uint32 | 20 aux
//	             uint32 (TrySendAux's word, else 0) | 24 the first 40
//	             payload bytes
//	next cells   0 seq uint64 | 8 the next 56 payload bytes
//
// # Ordering and crash safety
//
// The producer writes every cell of a message, then publishes it with one
// atomic store: the sequence word of its first cell. The consumer observes
// a message with one atomic load of that word; it reads nothing else until
// the load shows p+1, so it never delivers a message half written: a
// producer that dies before the final store leaves nothing visible. A
// batch (TrySendv) writes every message, the later ones' sequence words
// included, and stores the first message's sequence word last, so one
// store publishes them all. The consumer stores its position when it has
// consumed an eighth of the ring since its last store, and whenever it
// finds the ring empty, so the position the producer sees lags by less
// than an eighth of the ring and a message of up to half the ring always
// fits once the consumer has caught up; the producer reads it only when
// its cached copy says the ring is full.
//
// Append writes a message the same way without publishing it; Publish (or
// the next TrySend, TrySendFunc or TrySendv, which publish whatever was
// appended before their own messages) then makes every appended message
// visible with the one store of the first unpublished message's sequence
// word. Until then the consumer sees none of them, also when the ring is
// full of them: a producer that appends must publish before it waits for
// room.
//
// The producer keeps no state in the region: NewProducer finds its
// position by walking the published messages from the consumer's
// position, then clears the sequence words of every cell past them (a
// producer that died mid-batch may have left words valid for this lap
// there), so a producer may attach after Init, after a previous producer
// stopped, or after one died mid-message.
//
// At most one Producer and one Consumer may use a region at a time; the
// package does not check that.
package shmring

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/release"
)

// Layout constants.
const (
	// CellSize is the size of one cell, one cache line.
	CellSize = 64
	// FirstPayload is the payload a message's first cell carries.
	FirstPayload = CellSize - 24
	// NextPayload is the payload each further cell carries.
	NextPayload = CellSize - 8
	// DefaultMaxInline is a usual maximum message size: 4 KiB.
	DefaultMaxInline = 4096
	// MaxCells bounds the number of cells of a ring (1 GiB of cells).
	MaxCells = 1 << 24

	headerBytes = 3 * CellSize
	offRead     = CellSize
	magic       = 0x676e697274666577 // "weftring" little-endian
	version     = 1
)

var (
	// ErrInvalid reports a bad argument or a region that is not a valid
	// initialised ring (wrong magic, version, sizes or alignment).
	ErrInvalid = errs.ErrInvalid
	// ErrTruncated reports a received message longer than the buffer; the
	// message was consumed and the buffer holds its first bytes.
	ErrTruncated = errs.ErrTruncated
	// ErrTooLarge reports a message longer than the ring's maximum inline
	// size. It wraps ErrInvalid.
	ErrTooLarge = fmt.Errorf("shmring: message too large: %w", errs.ErrInvalid)
	// ErrCorrupt reports a published message whose header is impossible
	// (a length past the maximum): the region was overwritten by something
	// other than a Producer. It wraps ErrInvalid.
	ErrCorrupt = fmt.Errorf("shmring: corrupt ring: %w", errs.ErrInvalid)
)

// Layout returns the size in bytes of a region holding a ring of cells
// cells, or -1 when cells is not a power of two between 2 and MaxCells.
func Layout(cells int) int {
	if !validCells(cells) {
		return -1
	}
	return headerBytes + cells*CellSize
}

// CellsFor returns the number of cells a message of n payload bytes takes.
func CellsFor(n int) int {
	if n <= FirstPayload {
		return 1
	}
	return 1 + (n-FirstPayload+NextPayload-1)/NextPayload
}

// MaxInlineFor returns the largest maxInline Init accepts for cells cells:
// the largest message that fits in half of the ring.
func MaxInlineFor(cells int) int {
	if !validCells(cells) {
		return -1
	}
	return FirstPayload + (cells/2-1)*NextPayload
}

func validCells(cells int) bool {
	return cells >= 2 && cells <= MaxCells && bits.OnesCount(uint(cells)) == 1
}

// Init initialises mem as an empty ring of cells cells whose messages hold
// up to maxInline bytes. mem must be 64-byte aligned and at least
// Layout(cells) bytes; maxInline must lie in [0, MaxInlineFor(cells)]. Init
// zeroes the region's first Layout(cells) bytes; no Producer or Consumer
// may be attached while it runs.
func Init(mem []byte, cells, maxInline int) error {
	if !validCells(cells) {
		return fmt.Errorf("shmring: Init: %d cells: want a power of two in [2, %d]: %w", cells, MaxCells, ErrInvalid)
	}
	if maxInline < 0 || maxInline > MaxInlineFor(cells) {
		return fmt.Errorf("shmring: Init: max inline %d: want [0, %d] for %d cells: %w", maxInline, MaxInlineFor(cells), cells, ErrInvalid)
	}
	size := Layout(cells)
	if err := checkMem(mem, size); err != nil {
		return fmt.Errorf("shmring: Init: %w", err)
	}
	clear(mem[:size])
	binary.LittleEndian.PutUint32(mem[8:], version)
	binary.LittleEndian.PutUint32(mem[12:], CellSize)
	binary.LittleEndian.PutUint32(mem[16:], uint32(cells))
	binary.LittleEndian.PutUint32(mem[20:], uint32(maxInline))
	// The magic last: a region whose Init was cut short does not attach.
	atomic.StoreUint64(word(mem, 0), magic)
	return nil
}

func checkMem(mem []byte, size int) error {
	if len(mem) < size {
		return fmt.Errorf("region of %d bytes, want at least %d: %w", len(mem), size, ErrInvalid)
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%CellSize != 0 {
		return fmt.Errorf("region not %d-byte aligned: %w", CellSize, ErrInvalid)
	}
	return nil
}

// word returns the uint64 at byte offset off of mem (8-byte aligned, in
// bounds: the callers check).
func word(mem []byte, off int) *uint64 {
	return (*uint64)(unsafe.Pointer(&mem[off]))
}

// ring is the state both ends derive from a validated region.
type ring struct {
	mem       []byte // exactly Layout(cells) bytes
	cells     []byte // mem[headerBytes:]
	mask      uint64
	maxInline int
	read      *uint64
}

func attach(mem []byte, who string) (ring, error) {
	if err := checkMem(mem, headerBytes); err != nil {
		return ring{}, fmt.Errorf("shmring: %s: %w", who, err)
	}
	if m := atomic.LoadUint64(word(mem, 0)); m != magic {
		return ring{}, fmt.Errorf("shmring: %s: bad magic %#x (region not initialised): %w", who, m, ErrInvalid)
	}
	if v := binary.LittleEndian.Uint32(mem[8:]); v != version {
		return ring{}, fmt.Errorf("shmring: %s: version %d, want %d: %w", who, v, version, ErrInvalid)
	}
	if c := binary.LittleEndian.Uint32(mem[12:]); c != CellSize {
		return ring{}, fmt.Errorf("shmring: %s: cell size %d, want %d: %w", who, c, CellSize, ErrInvalid)
	}
	cells := int(binary.LittleEndian.Uint32(mem[16:]))
	if !validCells(cells) {
		return ring{}, fmt.Errorf("shmring: %s: %d cells: %w", who, cells, ErrInvalid)
	}
	maxInline := int(binary.LittleEndian.Uint32(mem[20:]))
	if maxInline > MaxInlineFor(cells) {
		return ring{}, fmt.Errorf("shmring: %s: max inline %d past %d for %d cells: %w", who, maxInline, MaxInlineFor(cells), cells, ErrInvalid)
	}
	size := Layout(cells)
	if len(mem) < size {
		return ring{}, fmt.Errorf("shmring: %s: region of %d bytes, want %d for %d cells: %w", who, len(mem), size, cells, ErrInvalid)
	}
	mem = mem[:size:size]
	return ring{
		mem:       mem,
		cells:     mem[headerBytes:],
		mask:      uint64(cells - 1),
		maxInline: maxInline,
		read:      word(mem, offRead),
	}, nil
}

// nCells returns the number of cells of the ring.
func (r *ring) nCells() int { return int(r.mask) + 1 }

// cellOff returns the byte offset in r.cells of position p's cell.
func (r *ring) cellOff(p uint64) int { return int(p&r.mask) * CellSize }

func (r *ring) seq(p uint64) *uint64 { return word(r.cells, r.cellOff(p)) }

// Producer is the sending end of a ring. Its methods must not be called
// concurrently.
type Producer struct {
	r       ring
	write   uint64 // next position to write
	cached  uint64 // last seen consumer position
	start   uint64 // first position not yet published (== write: none)
	scratch []byte // fillBulk's cells
}

// NewProducer attaches the sending end to an initialised region. It finds
// the position after the last published message; a region that is not a
// valid ring gives an error wrapping ErrInvalid.
func NewProducer(mem []byte) (*Producer, error) {
	r, err := attach(mem, "NewProducer")
	if err != nil {
		return nil, err
	}
	read := atomic.LoadUint64(r.read)
	p := read
	for p-read < uint64(r.nCells()) && atomic.LoadUint64(r.seq(p)) == p+1 {
		n := int(binary.LittleEndian.Uint32(r.cells[r.cellOff(p)+16:]))
		if n > r.maxInline {
			return nil, fmt.Errorf("shmring: NewProducer: message of %d bytes at position %d: %w", n, p, ErrCorrupt)
		}
		p += uint64(CellsFor(n))
	}
	if p-read > uint64(r.nCells()) {
		return nil, fmt.Errorf("shmring: NewProducer: messages past the ring's end: %w", ErrCorrupt)
	}
	// Cells past the last published message may hold what a producer
	// that stopped mid-message or mid-batch wrote without publishing:
	// sequence words valid for this lap. A shorter message written there
	// now would leave the consumer at such a word, so clear them all.
	for q := p; q-read < uint64(r.nCells()); q++ {
		atomic.StoreUint64(r.seq(q), 0)
	}
	return &Producer{r: r, write: p, cached: read, start: p}, nil
}

// MaxInline returns the largest message the ring carries.
func (pr *Producer) MaxInline() int { return pr.r.maxInline }

// Cells returns the number of cells of the ring.
func (pr *Producer) Cells() int { return pr.r.nCells() }

// room reports whether k more cells fit, refreshing the cached consumer
// position only when the cached one says they do not.
func (pr *Producer) room(k int) bool {
	size := uint64(pr.r.nCells())
	if pr.write+uint64(k)-pr.cached <= size {
		return true
	}
	pr.cached = atomic.LoadUint64(pr.r.read)
	return pr.write+uint64(k)-pr.cached <= size
}

// Prefetch distances, in cells. A producer that writes a message ending
// at position end asks for the line of cell end+writeAhead-1 for writing,
// when the consumer is known to be past it (the line holds no unread
// message): by the time the producer gets there the line has come over
// from the consumer's core, where the consumer last read it, and the
// stores do not wait for it. A consumer that finds a message at p asks
// for the line of cell p+readAhead, which the producer has usually
// written by then. Each alone gained nothing; together they took an 8-byte
// message rate between two processes from 13.2–15.0 M to 17.3–19.7 M
// msg/s (docs/perf/endpoint.md).
const writeAhead, readAhead = 8, 4

// warm prefetches, for writing, the cell writeAhead-1 past end (the
// position after the message being written), if the consumer has freed
// it.
func (pr *Producer) warm(end uint64) {
	if q := end + writeAhead - 1; q-pr.cached < uint64(pr.r.nCells()) {
		prefetchWrite(&pr.r.cells[pr.r.cellOff(q)])
	}
}

// fill writes a message at position p, its first sequence word last and
// only when seqFirst is set (a plain store: a batch's later messages,
// published by the store of the first one's). It returns the number of
// cells used.
func (pr *Producer) fill(p uint64, user uint64, aux uint32, payload []byte, seqFirst bool) int {
	r := &pr.r
	off := r.cellOff(p)
	if k := CellsFor(len(payload)); k >= bulkCells && off+k*CellSize <= len(r.cells) {
		return pr.fillBulk(p, off, k, user, aux, payload, seqFirst)
	}
	c := r.cells[off : off+CellSize : off+CellSize]
	binary.LittleEndian.PutUint64(c[8:], user)
	binary.LittleEndian.PutUint32(c[16:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(c[20:], aux)
	n := copy(c[24:], payload)
	k := 1
	for rest := payload[n:]; len(rest) > 0; k++ {
		q := p + uint64(k)
		off := r.cellOff(q)
		c := r.cells[off : off+CellSize : off+CellSize]
		binary.LittleEndian.PutUint64(c[0:], q+1)
		rest = rest[copy(c[8:], rest):]
	}
	if seqFirst {
		binary.LittleEndian.PutUint64(c[0:], p+1)
	}
	return k
}

// TrySend sends one message of payload with the user word user (matching
// data: tag, context, source). It returns false, and sends nothing, when
// the ring has no room; a payload longer than MaxInline gives ErrTooLarge.
func (pr *Producer) TrySend(user uint64, payload []byte) (bool, error) {
	return pr.TrySendAux(user, 0, payload)
}

// TrySendAux is TrySend with a second, 32-bit user word aux that the
// consumer reads with Aux (a check word the receiver compares before it
// takes the message).
func (pr *Producer) TrySendAux(user uint64, aux uint32, payload []byte) (bool, error) {
	if len(payload) > pr.r.maxInline {
		return false, fmt.Errorf("shmring: TrySend of %d bytes, max %d: %w", len(payload), pr.r.maxInline, ErrTooLarge)
	}
	k := CellsFor(len(payload))
	if !pr.room(k) {
		pr.Publish()
		return false, nil
	}
	p := pr.write
	pr.warm(p + uint64(k))
	pr.fill(p, user, aux, payload, p != pr.start)
	pr.write = p + uint64(k)
	pr.Publish()
	return true, nil
}

// Append writes one message like TrySend but does not publish it: the
// consumer sees it only after Publish or the next TrySend, TrySendFunc or
// TrySendv, together with every other message appended since the last
// publication, in order. It returns false, and writes nothing, when the
// ring has no room; since the consumer cannot take unpublished messages,
// the caller should then Publish before it waits for room. A payload
// longer than MaxInline gives ErrTooLarge.
func (pr *Producer) Append(user uint64, payload []byte) (bool, error) {
	if len(payload) > pr.r.maxInline {
		return false, fmt.Errorf("shmring: Append of %d bytes, max %d: %w", len(payload), pr.r.maxInline, ErrTooLarge)
	}
	k := CellsFor(len(payload))
	if !pr.room(k) {
		return false, nil
	}
	p := pr.write
	pr.warm(p + uint64(k))
	pr.fill(p, user, 0, payload, p != pr.start)
	pr.write = p + uint64(k)
	return true, nil
}

// Publish makes every appended message visible to the consumer with one
// release store; it does nothing when none is pending.
func (pr *Producer) Publish() {
	if p := pr.start; p != pr.write {
		pr.start = pr.write
		release.Store(pr.r.seq(p), p+1)
	}
}

// Pending reports whether appended messages wait for Publish.
func (pr *Producer) Pending() bool { return pr.start != pr.write }

// TrySendv sends the messages payloads[i] with user words users[i], in
// order, as many as fit, and publishes them with one store. It returns the
// number sent (0 when the ring is full). A payload past MaxInline gives
// ErrTooLarge and sends nothing; slices of different lengths give
// ErrInvalid.
func (pr *Producer) TrySendv(users []uint64, payloads [][]byte) (int, error) {
	if len(users) != len(payloads) {
		return 0, fmt.Errorf("shmring: TrySendv: %d user words for %d payloads: %w", len(users), len(payloads), ErrInvalid)
	}
	for i, b := range payloads {
		if len(b) > pr.r.maxInline {
			return 0, fmt.Errorf("shmring: TrySendv: message %d of %d bytes, max %d: %w", i, len(b), pr.r.maxInline, ErrTooLarge)
		}
	}
	sent := 0
	for i, b := range payloads {
		k := CellsFor(len(b))
		if !pr.room(k) {
			break
		}
		pr.warm(pr.write + uint64(k))
		pr.write += uint64(pr.fill(pr.write, users[i], 0, b, pr.write != pr.start))
		sent++
	}
	pr.Publish() // all of them, with what was appended before
	return sent, nil
}

// Consumer is the receiving end of a ring. Its methods must not be called
// concurrently.
type Consumer struct {
	r    ring
	read uint64
	pub  uint64 // position last stored in the read line
	lag  uint64 // cells consumed before the position is stored again
}

// NewConsumer attaches the receiving end to an initialised region; a
// region that is not a valid ring gives an error wrapping ErrInvalid.
func NewConsumer(mem []byte) (*Consumer, error) {
	r, err := attach(mem, "NewConsumer")
	if err != nil {
		return nil, err
	}
	read := atomic.LoadUint64(r.read)
	return &Consumer{r: r, read: read, pub: read, lag: uint64(max(r.nCells()/8, 1))}, nil
}

// MaxInline returns the largest message the ring carries.
func (co *Consumer) MaxInline() int { return co.r.maxInline }

// Peek reports the next message, user word and length, without consuming
// it; ok is false when the ring is empty.
func (co *Consumer) Peek() (user uint64, n int, ok bool, err error) {
	r := &co.r
	p := co.read
	if atomic.LoadUint64(r.seq(p)) != p+1 {
		if co.pub != p { // idle: hand back what was consumed since the last store
			co.pub = p
			release.Store(r.read, p)
		}
		return 0, 0, false, nil
	}
	prefetchRead(&r.cells[r.cellOff(p+readAhead)])
	off := r.cellOff(p)
	n = int(binary.LittleEndian.Uint32(r.cells[off+16:]))
	if n > r.maxInline {
		return 0, 0, false, fmt.Errorf("shmring: message of %d bytes at position %d, max %d: %w", n, p, r.maxInline, ErrCorrupt)
	}
	return binary.LittleEndian.Uint64(r.cells[off+8:]), n, true, nil
}

// Aux returns the aux word (TrySendAux) of the message the last Peek
// reported; 0 for one sent without.
func (co *Consumer) Aux() uint32 {
	r := &co.r
	return binary.LittleEndian.Uint32(r.cells[r.cellOff(co.read)+20:])
}

// TryRecv receives the next message into buf, returning its user word and
// full length n; ok is false when the ring is empty. When n > len(buf) the
// message is consumed, buf holds its first len(buf) bytes and err wraps
// ErrTruncated.
func (co *Consumer) TryRecv(buf []byte) (user uint64, n int, ok bool, err error) {
	user, n, ok, err = co.Peek()
	if !ok {
		return 0, 0, false, err
	}
	return user, n, true, co.take(buf, n)
}

// Take receives the message that the last Peek reported (ok true, err
// nil), of n bytes as Peek returned, into buf, like TryRecv but without
// looking at the ring's head again: a receiver that has just peeked at a
// message to match it saves the second check. It returns an error
// wrapping ErrTruncated when n > len(buf) (the message is consumed, buf
// holds its first len(buf) bytes). Calling it without such a Peek, or
// with another n, corrupts the ring's state.
func (co *Consumer) Take(buf []byte, n int) error { return co.take(buf, n) }

func (co *Consumer) take(buf []byte, n int) error {
	r := &co.r
	p := co.read
	off := r.cellOff(p)
	got := copy(buf, r.cells[off+24:off+24+min(n, FirstPayload)])
	k := CellsFor(n)
	for i := 1; i < k && got < len(buf); i++ {
		off := r.cellOff(p + uint64(i))
		got += copy(buf[got:], r.cells[off+8:off+8+min(n-FirstPayload-(i-1)*NextPayload, NextPayload)])
	}
	co.read = p + uint64(k)
	if co.read-co.pub >= co.lag { // hand the cells back, a few at a time
		co.pub = co.read
		release.Store(r.read, co.read)
	}
	if n > len(buf) {
		return fmt.Errorf("shmring: message of %d bytes into a buffer of %d: %w", n, len(buf), ErrTruncated)
	}
	return nil
}

// TryRecvFunc receives the next message by handing its payload to f,
// piece by piece in order (off is the piece's offset in the payload; the
// pieces are the cells' payload areas, up to 56 bytes each), instead of
// copying it into one buffer: a receiver can unpack a message straight
// from the cells. f must not keep the pieces. It returns the user word and
// the payload's length; ok is false, and f is not called, when the ring is
// empty.
func (co *Consumer) TryRecvFunc(f func(off int, piece []byte)) (user uint64, n int, ok bool, err error) {
	user, n, ok, err = co.Peek()
	if !ok {
		return 0, 0, false, err
	}
	r := &co.r
	p := co.read
	off := r.cellOff(p)
	first := min(n, FirstPayload)
	if first > 0 {
		f(0, r.cells[off+24:off+24+first])
	}
	k := CellsFor(n)
	for i := 1; i < k; i++ {
		o := FirstPayload + (i-1)*NextPayload
		off := r.cellOff(p + uint64(i))
		f(o, r.cells[off+8:off+8+min(n-o, NextPayload)])
	}
	co.read = p + uint64(k)
	if co.read-co.pub >= co.lag {
		co.pub = co.read
		release.Store(r.read, co.read)
	}
	return user, n, true, nil
}

// TrySendFunc sends a message of n payload bytes with the user word user,
// letting fill write the payload straight into the cells, piece by piece
// in order (off is the piece's offset in the payload; pieces are up to 56
// bytes): a sender can pack a message into the ring without a buffer of
// its own. fill must write every byte of each piece and must not keep it.
// It returns false, without calling fill, when the ring has no room; n
// past MaxInline gives ErrTooLarge.
func (pr *Producer) TrySendFunc(user uint64, n int, fill func(off int, piece []byte)) (bool, error) {
	if n < 0 || n > pr.r.maxInline {
		return false, fmt.Errorf("shmring: TrySendFunc of %d bytes, max %d: %w", n, pr.r.maxInline, ErrTooLarge)
	}
	k := CellsFor(n)
	if !pr.room(k) {
		pr.Publish()
		return false, nil
	}
	r := &pr.r
	p := pr.write
	pr.warm(p + uint64(k))
	off := r.cellOff(p)
	c := r.cells[off : off+CellSize : off+CellSize]
	binary.LittleEndian.PutUint64(c[8:], user)
	binary.LittleEndian.PutUint32(c[16:], uint32(n))
	binary.LittleEndian.PutUint32(c[20:], 0)
	if first := min(n, FirstPayload); first > 0 {
		fill(0, c[24:24+first])
	}
	for i := 1; i < k; i++ {
		q := p + uint64(i)
		off := r.cellOff(q)
		cc := r.cells[off : off+CellSize : off+CellSize]
		binary.LittleEndian.PutUint64(cc[0:], q+1)
		o := FirstPayload + (i-1)*NextPayload
		fill(o, cc[8:8+min(n-o, NextPayload)])
	}
	if p != pr.start { // published with the messages appended before it
		binary.LittleEndian.PutUint64(c[0:], p+1)
	}
	pr.write = p + uint64(k)
	pr.Publish()
	return true, nil
}

// bulkCells is the size in cells from which fill lays a message out in
// the producer's scratch and copies it into the ring with one copy:
// stores of whole lines in one stream, where writing the cells word by
// word waits for each line to come over from the consumer's core.
const bulkCells = 3

// fillBulk is fill for a message of k cells at offset off that does not
// wrap: the cells are built in pr.scratch and copied into the ring at
// once, all but the first cell's sequence word, which the consumer may be
// polling (it is stored on its own, as by fill).
func (pr *Producer) fillBulk(p uint64, off, k int, user uint64, aux uint32, payload []byte, seqFirst bool) int {
	r := &pr.r
	n := k * CellSize
	if cap(pr.scratch) < n {
		pr.scratch = make([]byte, max(n, CellsFor(r.maxInline)*CellSize))
	}
	b := pr.scratch[:n]
	binary.LittleEndian.PutUint64(b[8:], user)
	binary.LittleEndian.PutUint32(b[16:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[20:], aux)
	rest := payload[copy(b[24:CellSize], payload):]
	for i := 1; i < k; i++ {
		c := b[i*CellSize : (i+1)*CellSize]
		binary.LittleEndian.PutUint64(c[0:], p+uint64(i)+1)
		rest = rest[copy(c[8:], rest):]
	}
	copy(r.cells[off+8:off+n], b[8:]) // not the first sequence word: the consumer may be loading it
	if seqFirst {
		binary.LittleEndian.PutUint64(r.cells[off:], p+1)
	}
	return k
}
