package endpoint

// Typed point-to-point: messages described by a derived datatype (ddt).
//
// A message is the packed stream of count elements of the type: the sender
// packs, the receiver unpacks, so sender and receiver may use different
// layouts of the same data (a column sent, a row received). A type whose
// count elements form one contiguous block is sent and received in place,
// with no pack at all; any other layout is packed (by the type's compiled
// code when the JIT has compiled it, else the interpreter) straight into
// what the transport sends from, or moved block by block without packing
// (node.go's gather, fabtyped.go's zero copy), and received data is
// unpacked into the user's layout as it arrives.

import (
	"context"
	"fmt"
	"sort"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/gpu"
	// The JIT compiles the types typed messages pack (WEFT_JIT decides
	// when); importing it here registers it for every program that sends
	// typed messages.
	_ "github.com/weft-hpc/weft/jit"
)

// typedRecv is the layout a typed receive unpacks into: one part, or
// the parts of a multi-part receive, back to back in the stream.
type typedRecv struct {
	buf   []byte // the user's typed buffer (one part)
	count int
	t     *ddt.Type
	n     int    // packed size: the bytes the receive takes
	parts []Part // more than one part: these instead of buf, count, t
	ends  []int  // ends[i]: stream offset where part i ends
	// sigOnly: a contiguous receive (into its own buf) that keeps the
	// layout only for the type-signature check.
	sigOnly bool
	// dev: the layout is count elements of t in GPU memory
	// (gputyped.go), not buf; rx the endpoint that receives into it
	// (its bounce buffers are mapped into the device).
	dev *gpu.Typed
	rx  *vci
	// tx: the endpoint that sends from it (its segment buffers are
	// mapped into the device for eager sends).
	tx *vci
}

// tinyMax: the average block below which a receive's layout counts as
// tiny blocks (tinyBlocks).
const tinyMax = 16

// tinyBlocks reports whether the receive's layout (one part in host
// memory) averages blocks of under tinyMax bytes: an unpack of such
// blocks reads its source a few bytes at a time, and from lines another
// core has just written it waits for each line in turn.
func (u *typedRecv) tinyBlocks() bool {
	if u.parts != nil || u.dev != nil || u.sigOnly {
		return false
	}
	nb, err := u.t.Blocks(u.count)
	return err == nil && nb > 0 && int64(u.n) < tinyMax*nb
}

// unpack unpacks piece, the stream's bytes from off, into the layout.
func (u *typedRecv) unpack(off int, piece []byte) error {
	if u.dev != nil {
		if u.rx != nil {
			return u.rx.devUnpackRx(u.dev, off, piece)
		}
		return devUnpack(u.dev, off, piece)
	}
	if u.parts == nil {
		_, err := u.t.UnpackRange(u.buf, piece, 0, u.count, int64(off))
		return err
	}
	return u.each(off, piece, func(p Part, from int64, b []byte) error {
		_, err := p.Type.UnpackRange(p.Buf, b, 0, p.Count, from)
		return err
	})
}

// pack packs the stream's bytes from off into piece.
func (u *typedRecv) pack(off int, piece []byte) error {
	if u.dev != nil {
		if u.tx != nil {
			return u.tx.devPackTx(u.dev, off, piece)
		}
		return devPack(u.dev, off, piece)
	}
	if u.parts == nil {
		_, err := u.t.PackRange(piece, u.buf, 0, u.count, int64(off))
		return err
	}
	return u.each(off, piece, func(p Part, from int64, b []byte) error {
		_, err := p.Type.PackRange(b, p.Buf, 0, p.Count, from)
		return err
	})
}

// each calls f for every part piece overlaps, with the part's offset and
// the bytes of piece that belong to it.
func (u *typedRecv) each(off int, piece []byte, f func(p Part, from int64, b []byte) error) error {
	i := sort.SearchInts(u.ends, off+1) // first part ending after off
	for len(piece) > 0 && i < len(u.parts) {
		start := 0
		if i > 0 {
			start = u.ends[i-1]
		}
		k := min(len(piece), u.ends[i]-off)
		if k > 0 {
			if err := f(u.parts[i], int64(off-start), piece[:k]); err != nil {
				return fmt.Errorf("part %d: %w", i, err)
			}
			piece, off = piece[k:], off+k
		}
		i++
	}
	return nil
}

func (u *typedRecv) String() string {
	if u.dev != nil {
		return fmt.Sprintf("%d elements of %s in GPU memory", u.count, u.t)
	}
	if u.parts == nil {
		return u.t.String()
	}
	return fmt.Sprintf("%d parts", len(u.parts))
}

// Part is one piece of a message gathered from, or scattered into,
// several Go slices (the particle arrays of a molecular-dynamics code, the
// fields of a weather model): Count elements of Type laid out in Buf,
// Buf[0] being displacement 0 of the first element. A multi-part message
// is the parts' packed streams back to back; each part is checked against
// its own slice, and no absolute address is involved (what MPI programs
// do with MPI_BOTTOM and absolute displacements).
type Part struct {
	Buf   []byte
	Count int
	Type  *ddt.Type
}

// newParts validates parts and returns their layout and packed size.
func newParts(parts []Part) (*typedRecv, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("endpoint: a message of no parts: %w", ErrInvalid)
	}
	u := &typedRecv{parts: parts, ends: make([]int, len(parts))}
	for i, p := range parts {
		_, _, n, err := typedView(p.Buf, p.Count, p.Type)
		if err != nil {
			return nil, fmt.Errorf("endpoint: part %d: %w", i, err)
		}
		if u.n > maxInt-n {
			return nil, fmt.Errorf("endpoint: parts of more than %d bytes: %w", maxInt, ErrInvalid)
		}
		u.n += n
		u.ends[i] = u.n
	}
	return u, nil
}

const maxInt = int(^uint(0) >> 1)

// IsendParts starts sending one message made of parts (see Part) to dest
// with tag. The parts' slices must not be modified until the request
// completes (large messages to libfabric peers are read from them in
// place). The receiver may take the message with any layout of the same
// data: one typed buffer, other parts, bytes.
func (c *Comm) IsendParts(parts []Part, dest, tag int) (*Request, error) {
	if null, err := c.sendTo(dest, tag); err != nil {
		return nil, err
	} else if null {
		return completedRequest, nil
	}
	u, err := newParts(parts)
	if err != nil {
		return nil, err
	}
	return c.isendLayout(u, dest, tag)
}

// sendTo checks a send's communicator, destination and tag; null is true
// for ProcNull (the send is complete at once).
func (c *Comm) sendTo(dest, tag int) (null bool, err error) {
	if err := c.usable("send"); err != nil {
		return false, err
	}
	if dest == ProcNull {
		return true, nil
	}
	if err := c.checkPeer(dest, false); err != nil {
		return false, err
	}
	return false, checkTag(tag, false)
}

// isendLayout sends the non-contiguous message of layout u: by the node
// transport's or libfabric's typed paths, else packed into a buffer of
// its own.
func (c *Comm) isendLayout(u *typedRecv, dest, tag int) (*Request, error) {
	if r, done, err := c.isendPackedNode(u, dest, tag, false); done {
		return r, c.counted(dest, u.n, err)
	}
	if r, done, err := c.isendFabricTyped(u, dest, tag); done {
		return r, c.counted(dest, u.n, err)
	}
	return c.isendPackedWhole(u, dest, tag)
}

// counted counts a message of n bytes to dest that a typed path (which
// does not go through isendSync) started, if err is nil, and returns err.
func (c *Comm) counted(dest, n int, err error) error {
	if err == nil {
		c.count(dest, n)
	}
	return err
}

// IrecvParts starts receiving one message into parts (see Part), from src
// (AnySource, ProcNull) with tag (AnyTag): its stream fills the parts in
// order; a shorter message fills a prefix, a longer one completes with
// ErrTruncated.
func (c *Comm) IrecvParts(parts []Part, src, tag int) (*Request, error) {
	if err := c.usable("receive"); err != nil {
		return nil, err
	}
	if src == ProcNull {
		return procNullRecv(), nil
	}
	u, err := newParts(parts)
	if err != nil {
		return nil, err
	}
	return c.irecvReq(nil, src, tag, c.ctx, false, u)
}

// SendParts sends one message made of parts (see IsendParts).
func (c *Comm) SendParts(ctx context.Context, parts []Part, dest, tag int) error {
	r, err := c.IsendParts(parts, dest, tag)
	return sendWait(ctx, r, err)
}

// RecvParts receives one message into parts (see IrecvParts).
func (c *Comm) RecvParts(ctx context.Context, parts []Part, src, tag int) (Status, error) {
	r, err := c.IrecvParts(parts, src, tag)
	return recvWait(ctx, r, err)
}

// typedView returns, for count elements of t in buf, the contiguous part
// of buf they occupy (contig, ok true), or ok false when they must be
// packed; n is the packed size. Errors: nil or uncommitted type, negative
// count, elements outside buf.
func typedView(buf []byte, count int, t *ddt.Type) (contig []byte, ok bool, n int, err error) {
	if t == nil {
		return nil, false, 0, fmt.Errorf("endpoint: nil datatype: %w", ErrInvalid)
	}
	if count < 0 {
		return nil, false, 0, fmt.Errorf("endpoint: count %d: %w", count, ErrInvalid)
	}
	size, err := t.PackSize(count)
	if err != nil {
		return nil, false, 0, fmt.Errorf("endpoint: %w", err)
	}
	if size > int64(maxMessage) {
		return nil, false, 0, fmt.Errorf("endpoint: %d elements of %s are %d bytes: %w", count, t, size, ErrInvalid)
	}
	n = int(size)
	if n == 0 {
		return buf[:0], true, 0, nil
	}
	// Whether the layout is one block is told from the type's
	// description where it can, without Flatten's refusal, which built an
	// error (a few hundred ns on every typed send and receive).
	s, one, err := t.OneSegment(count)
	if err != nil {
		return nil, false, 0, fmt.Errorf("endpoint: %w", err)
	}
	if !one { // pack
		if err := t.CheckBounds(count, len(buf)); err != nil {
			return nil, false, 0, fmt.Errorf("endpoint: %w", err)
		}
		return nil, false, n, nil
	}
	if s.Off < 0 || s.Off > int64(len(buf)) || s.Len > int64(len(buf))-s.Off {
		return nil, false, 0, fmt.Errorf("endpoint: %d elements of %s span bytes [%d, %d) of a %d-byte buffer: %w",
			count, t, s.Off, s.Off+s.Len, len(buf), ddt.ErrBounds)
	}
	return buf[s.Off : s.Off+s.Len : s.Off+s.Len], true, n, nil
}

// maxMessage bounds the size of one typed message.
const maxMessage = 1<<63 - 1

// IsendTyped starts sending count elements of datatype t laid out in buf
// (buf[0] is displacement 0 of the first element) to rank dest with tag. A
// contiguous layout is sent from buf as Isend sends it; any other is
// packed as it goes out, or read by the receiver straight from its blocks
// (docs/endpoint.md, "Typed messages", says which path a message takes).
// buf must not be modified until the request completes. dest may be
// ProcNull.
func (c *Comm) IsendTyped(buf []byte, count int, t *ddt.Type, dest, tag int) (*Request, error) {
	return c.isendTyped(buf, count, t, dest, tag, false)
}

// isendTyped is IsendTyped; blocking tells that the caller waits for the
// send at once (SendTyped), so that the node transport may take its
// pipelined copy (nodecopy.go).
func (c *Comm) isendTyped(buf []byte, count int, t *ddt.Type, dest, tag int, blocking bool) (*Request, error) {
	if err := c.usable("send"); err != nil {
		return nil, err
	}
	if dest == ProcNull {
		return completedRequest, nil
	}
	if err := c.checkPeer(dest, false); err != nil {
		return nil, err
	}
	if err := checkTag(tag, false); err != nil {
		return nil, err
	}
	contig, ok, n, err := typedView(buf, count, t)
	if err != nil {
		return nil, err
	}
	if ok {
		return c.isendContigTyped(contig, buf, count, t, n, dest, tag, blocking)
	}
	if r, done, err := c.isendTypedGather(buf, count, t, n, dest, tag, blocking); done {
		return r, c.counted(dest, n, err)
	}
	// u stays on the stack: the node transport packs it at once, and a
	// libfabric send that packs later keeps a copy in its request.
	u := typedRecv{buf: buf, count: count, t: t, n: n}
	if r, done, err := c.isendPackedNode(&u, dest, tag, blocking); done {
		return r, c.counted(dest, n, err)
	}
	if r, done, err := c.isendFabricTyped(&u, dest, tag); done {
		return r, c.counted(dest, n, err)
	}
	return c.isendPackedWhole(&u, dest, tag)
}

// isendPackedWhole sends layout u packed whole: to a libfabric peer from
// a staging buffer of the endpoint's (isendPackedStaged), to a node peer
// whose ring is busy from a buffer of its own.
func (c *Comm) isendPackedWhole(u *typedRecv, dest, tag int) (*Request, error) {
	if c.link(dest) == nil {
		return c.isendPackedStaged(u, dest, tag)
	}
	packed := make([]byte, u.n)
	if err := u.pack(0, packed); err != nil {
		return nil, fmt.Errorf("endpoint: pack %s: %w", u.String(), err)
	}
	return c.isendSig(packed, dest, tag, c.ctx, u.signature())
}

// isendPackedStaged sends layout u to a libfabric peer packed whole into
// a staging buffer of the endpoint's (reused: a fresh buffer of the
// message's size costs the first touch of its pages, and its
// registration a miss of the MR cache), which goes back when the send
// completes.
func (c *Comm) isendPackedStaged(u *typedRecv, dest, tag int) (*Request, error) {
	v := c.v
	v.lock()
	b := v.stage(u.n)
	v.unlock()
	if err := u.pack(0, b); err != nil {
		v.lock()
		v.unstage(b)
		v.unlock()
		return nil, fmt.Errorf("endpoint: pack %s: %w", u.String(), err)
	}
	r, err := c.isendSig(b, dest, tag, c.ctx, u.signature())
	if err == nil {
		pathStats.packed.Add(1)
	}
	v.lock()
	defer v.unlock()
	switch {
	case err != nil || r.done || r.reqExt == nil || r.staged:
		// Failed, complete at once or copied into a buffer of its own
		// (an eager send): b is free. (The caller alone holds r yet, so
		// it cannot have been released and reused.)
		v.unstage(b)
	default:
		r.staged = true // releaseStaging takes it back
	}
	return r, err
}

// isendPackedNode sends the non-contiguous message of layout u to a peer
// on the node transport without a buffer of its own: packed into the
// ring's cells when it fits inline; above the eager limit, from a
// blocking send (or one that fits the free slots), into the pair's copy
// area fragment by fragment (nodecopy.go); else into a staging buffer of
// the endpoint's (reused), from which the receiver copies it once, the
// send complete at once. done is false when the message takes another
// path (a libfabric peer, a ring full or busy with queued sends).
func (c *Comm) isendPackedNode(u *typedRecv, dest, tag int, blocking bool) (r *Request, done bool, err error) {
	n := u.n
	l := c.link(dest)
	if l == nil {
		return nil, false, nil
	}
	v := c.v
	v.lock()
	defer v.unlock()
	if queued, err := v.beginSend(); err != nil || queued {
		return nil, err != nil, err // still queued: the byte path queues after them
	}
	w := packTag(c.ctx, c.slots[dest], c.rank, tag)
	sig := u.signature()
	if n <= l.inline {
		// Packed in one call into scratch, then copied into a free medium
		// slot (from medFirst bytes, as the byte path does) or the cells:
		// a pack's small stores into memory the receiver's core last read
		// cost more than one copy of whole lines (docs/perf/endpoint.md).
		b := v.inlineScratch(n)
		if err := u.pack(0, b); err != nil {
			return nil, true, fmt.Errorf("endpoint: pack %s: %w", u.String(), err)
		}
		if l.slotFits(n) && v.nodeSendMedium(l, w, sigWord(sig), b) {
			return completedRequest, true, nil
		}
		ok, err := l.out.TrySendAux(w, sigWord(sig), b)
		if err != nil {
			return nil, true, fmt.Errorf("endpoint: send %d bytes to rank %d: %w", n, dest, err)
		}
		if ok {
			return completedRequest, true, nil
		}
		return nil, false, nil // ring full: the byte path retries and queues
	}
	if v.nodeCopyTakes(l, n, blocking, true) {
		if r, ok := v.nodeSendCopyTyped(c, l, w, sigWord(sig), u, dest); ok {
			return r, true, nil
		}
	}
	b := v.stage(n)
	if v.nodePiped(l, n) {
		return completedRequest, true, v.nodePipeSend(c, l, u, b, w, dest, sig)
	}
	if err := u.pack(0, b); err != nil {
		v.unstage(b)
		return nil, true, fmt.Errorf("endpoint: pack %s: %w", u.String(), err)
	}
	r, err = v.nodeSendStaged(c, l, b, w, dest, true, sig, false)
	return r, true, err
}

// IrecvTyped starts receiving into buf a message of at most count elements
// of datatype t from src (AnySource, ProcNull) with tag (AnyTag). The
// message's bytes are the sender's packed stream: any layout whose data
// agree may have sent it. A message shorter than count elements fills the
// first elements (Status.Count says how many bytes came; CountOf turns
// them into elements); a longer one completes with ErrTruncated after
// filling all count elements.
func (c *Comm) IrecvTyped(buf []byte, count int, t *ddt.Type, src, tag int) (*Request, error) {
	if err := c.usable("receive"); err != nil {
		return nil, err
	}
	if src == ProcNull {
		return procNullRecv(), nil
	}
	return c.irecvTyped(buf, count, t, src, tag, nil)
}

// irecvTyped is IrecvTyped past its checks; with m it receives that
// message (a matched probe's) instead of matching.
func (c *Comm) irecvTyped(buf []byte, count int, t *ddt.Type, src, tag int, m *unexp) (*Request, error) {
	contig, ok, n, err := typedView(buf, count, t)
	if err != nil {
		return nil, err
	}
	if ok {
		if n > 0 && t != ddt.Byte {
			// The layout is kept for the type-signature check of
			// libfabric messages.
			u := typedRecv{buf: buf, count: count, t: t, n: n, sigOnly: true}
			return c.recvReq(contig, src, tag, c.ctx, false, &u, m)
		}
		return c.recvReq(contig, src, tag, c.ctx, false, nil, m)
	}
	u := typedRecv{buf: buf, count: count, t: t, n: n}
	return c.recvReq(nil, src, tag, c.ctx, false, &u, m)
}

// capacity is the number of bytes receive r takes.
func (r *Request) capacity() int {
	if r.reqExt != nil && r.typed != nil {
		return r.typed.n
	}
	return len(r.buf)
}

// take stores piece, the message's bytes from offset off, into receive r:
// copied into r.buf, or for a typed receive unpacked straight into the
// user's layout. Bytes past the capacity are dropped (truncation is the
// caller's to report); an unpack error becomes r's error.
func (r *Request) take(off int, piece []byte) {
	c := r.capacity()
	if off >= c || len(piece) == 0 {
		return
	}
	piece = piece[:min(len(piece), c-off)]
	if r.reqExt != nil && r.typed != nil {
		u := r.typed
		if err := u.unpack(off, piece); err != nil && r.err == nil {
			r.err = fmt.Errorf("endpoint: unpack into %s: %w", u.String(), err)
		}
		return
	}
	copy(r.buf[off:], piece)
}

// unpackTyped unpacks what a typed receive got into the user's layout; an
// unpack error becomes the request's error.
func (r *Request) unpackTyped(u *typedRecv) {
	if r.st.Canceled || r.st.Count == 0 {
		return
	}
	if err := u.unpack(0, r.buf[:r.st.Count]); err != nil && r.err == nil {
		r.err = fmt.Errorf("endpoint: unpack %d bytes into %s: %w", r.st.Count, u.String(), err)
	}
}

// SendTyped sends count elements of t from buf to dest and returns once
// buf may be reused (see IsendTyped) or ctx ends.
func (c *Comm) SendTyped(ctx context.Context, buf []byte, count int, t *ddt.Type, dest, tag int) error {
	r, err := c.isendTyped(buf, count, t, dest, tag, true)
	return sendWait(ctx, r, err)
}

// RecvTyped receives at most count elements of t into buf (see
// IrecvTyped). If ctx ends first the receive is cancelled and the error
// wraps ctx.Err().
func (c *Comm) RecvTyped(ctx context.Context, buf []byte, count int, t *ddt.Type, src, tag int) (Status, error) {
	r, err := c.IrecvTyped(buf, count, t, src, tag)
	return recvWait(ctx, r, err)
}

// Sendrecv sends count elements of stype from sbuf to dest with stag and
// receives at most rcount elements of rtype into rbuf from src with rtag,
// both at once, so that ranks exchanging with each other cannot deadlock
// (MPI_Sendrecv). dest and src may be ProcNull.
func (c *Comm) Sendrecv(ctx context.Context, sbuf []byte, scount int, stype *ddt.Type, dest, stag int,
	rbuf []byte, rcount int, rtype *ddt.Type, src, rtag int) (Status, error) {
	rr, err := c.IrecvTyped(rbuf, rcount, rtype, src, rtag)
	if err != nil {
		return Status{}, err
	}
	sr, err := c.IsendTyped(sbuf, scount, stype, dest, stag)
	if err != nil {
		_ = rr.Cancel()
		_, _ = rr.waitTimeout(c.v.timeout)
		return Status{}, err
	}
	if err := WaitAll(ctx, sr, rr); err != nil {
		if !rr.Done() {
			_ = rr.Cancel()
		}
		return Status{}, err
	}
	_, st, _ := rr.testResult()
	sr.Release()
	rr.Release()
	return st, nil
}

// SendrecvReplace sends count elements of t from buf to dest with stag
// and receives at most count elements of t into the same layout of buf
// from src with rtag (MPI_Sendrecv_replace): the shift of a ring or of
// Cannon's algorithm in place. What is sent is packed first, so the
// receive may land in buf while the send is in flight. dest and src may
// be ProcNull.
func (c *Comm) SendrecvReplace(ctx context.Context, buf []byte, count int, t *ddt.Type, dest, stag, src, rtag int) (Status, error) {
	if err := c.usable("send-receive"); err != nil {
		return Status{}, err
	}
	_, _, n, err := typedView(buf, count, t)
	if err != nil {
		return Status{}, err
	}
	packed := make([]byte, n)
	if dest != ProcNull && n > 0 {
		if _, err := t.Pack(packed, buf, count); err != nil {
			return Status{}, fmt.Errorf("endpoint: send-receive: pack %d elements of %s: %w", count, t.Name(), err)
		}
	}
	return c.Sendrecv(ctx, packed, n, ddt.Byte, dest, stag, buf, count, t, src, rtag)
}

// CountOf returns the number of whole elements of t a receive's Count
// bytes make (MPI_Get_count); a Count that is not a whole number of
// elements gives an error wrapping ErrInvalid.
func (s Status) CountOf(t *ddt.Type) (int, error) {
	if t == nil || t.Size() <= 0 {
		if s.Count == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("endpoint: count of %d bytes in a type of no data: %w", s.Count, ErrInvalid)
	}
	if int64(s.Count)%t.Size() != 0 {
		return 0, fmt.Errorf("endpoint: %d bytes are not a whole number of %d-byte %s elements: %w", s.Count, t.Size(), t, ErrInvalid)
	}
	return int(int64(s.Count) / t.Size()), nil
}

// sendWait waits for send r (started with error err) and releases it.
func sendWait(ctx context.Context, r *Request, err error) error {
	if err != nil {
		return err
	}
	_, err = r.Wait(ctx)
	r.Release()
	return err
}

// recvWait waits for receive r (started with error err), cancelling it
// if ctx ends first, and releases it once done.
func recvWait(ctx context.Context, r *Request, err error) (Status, error) {
	if err != nil {
		return Status{}, err
	}
	st, err := waitOrCancel(ctx, r)
	if r.Done() {
		r.Release()
	}
	return st, err
}

// procNullRecv is a receive from ProcNull: complete, nothing received.
func procNullRecv() *Request {
	return &Request{done: true, state: stDone, st: Status{Source: ProcNull, Tag: AnyTag}}
}

// sliceBytes views the memory of a slice of pointer-free T as bytes.
func sliceBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// IsendOf starts sending the elements of s, a slice of a pointer-free Go
// type (numbers, arrays, structs of those), as the datatype ddt.Of[T]: a
// struct's fields go, its padding does not.
func IsendOf[T any](c *Comm, s []T, dest, tag int) (*Request, error) {
	t, err := ddt.Of[T]()
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	return c.IsendTyped(sliceBytes(s), len(s), t, dest, tag)
}

// IrecvOf starts receiving at most len(s) elements of T into s (see
// IsendOf and IrecvTyped).
func IrecvOf[T any](c *Comm, s []T, src, tag int) (*Request, error) {
	t, err := ddt.Of[T]()
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	return c.IrecvTyped(sliceBytes(s), len(s), t, src, tag)
}

// SendOf sends the elements of s (see IsendOf and SendTyped).
func SendOf[T any](ctx context.Context, c *Comm, s []T, dest, tag int) error {
	t, err := ddt.Of[T]()
	if err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	return c.SendTyped(ctx, sliceBytes(s), len(s), t, dest, tag)
}

// RecvOf receives at most len(s) elements of T into s; Status.CountOf
// with ddt.Of[T] gives how many came.
func RecvOf[T any](ctx context.Context, c *Comm, s []T, src, tag int) (Status, error) {
	t, err := ddt.Of[T]()
	if err != nil {
		return Status{}, fmt.Errorf("endpoint: %w", err)
	}
	return c.RecvTyped(ctx, sliceBytes(s), len(s), t, src, tag)
}
