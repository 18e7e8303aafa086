package endpoint

// Typed messages towards libfabric peers, without packing into a buffer
// of the message's size.
//
//   - Eager (packed size ≤ eager limit): packed straight into a registered
//     segment buffer of the endpoint (or the inject scratch) and sent
//     from there; the receiver unpacks from its bounce buffer.
//   - Zero copy (larger, blocks averaging ≥ zcblock bytes): the sender
//     registers its buffers and publishes a table of its blocks (remote
//     address, length, key); the receiver reads the table, then moves the
//     data with fi_readv straight from the sender's blocks into its own
//     blocks (at most the provider's iov_limit local pieces per read, one
//     read per remote contiguous range), and sends the FIN.
//   - Pipeline (larger, small blocks): after the receiver has matched the
//     header it answers with a CTS naming its request; the sender packs
//     segments (resumable partial packs) into a ring of registered segment
//     buffers, each sent as soon as it is packed, and the receiver unpacks
//     each segment from its bounce buffer as it arrives.
//
// A contiguous receive of a zero-copy message reads into its one block;
// a typed receive of a plain (contiguous) rendezvous reads into its
// blocks when they are large, else into a buffer it unpacks at the end.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/fabric"
)

// Extended rendezvous header: the 32-byte header, then a word saying
// which protocol the message takes (low byte) and, for zero copy, the
// number of blocks in the sender's table (above it), then the hash of
// the message's type signature (ddt.Type.Signature; 0: untyped).
const (
	rdvExtSize = 48
	modePlain  = 0 // one registered contiguous buffer
	modeTable  = 1 // addr/key name the sender's block table
	modePipe   = 2 // pipeline: the receiver answers with a CTS
	modeInline = 3 // eager: the data follows the header in the message
)

// Pipeline control words (ctrl and rts bits both set): a CTS to the
// sender carries the rendezvous sequence in the low bits; a data
// segment to the receiver has pipeDataBit, the sender's sequence
// (pipeSeqBits bits) and the receiver's request token (24 bits).
const (
	pipeDataBit = uint64(1) << 61
	pipeTokBits = 24
	pipeSeqBits = 36
	pipeTokMask = uint64(1)<<pipeTokBits - 1
	pipeSeqMask = uint64(1)<<pipeSeqBits - 1
)

// Operation contexts of pipeline segments: the request's slot, segBit
// and the segment buffer's index.
const (
	segBit      = uint64(1) << 40
	directBit   = uint64(1) << 42 // a segment sent from the user's GPU buffer (no ring segment)
	ctxSlotMask = uint64(1)<<32 - 1
)

// pathStats counts the typed messages of this process per libfabric
// path (the tests check that each regime is reached).
var pathStats struct {
	eager, zeroCopy, pipeline, recvBlocks, recvUnpack, packed atomic.Int64
	// GPU messages: rings made for staging [0] and for hmem [1]; pieces
	// unpacked through the staging buffer [0] and straight from the
	// mapped bounce buffers [1].
	devRings, devRecv [2]atomic.Int64
	devLanded         atomic.Int64    // landing chunks of pipelined GPU receives unpacked (gputyped.go)
	devSend           [2]atomic.Int64 // eager GPU sends packed through the staging buffer, in place in mapped segment buffers
	devDirect         atomic.Int64    // contiguous GPU sends from the user's buffer
}

// maxReadsInFlight bounds the RMA reads one rendezvous receive keeps
// posted (a window: completions post the next ones).
const maxReadsInFlight = 32

func putExt(b []byte, ext, sig uint64) {
	binary.LittleEndian.PutUint64(b[32:], ext)
	binary.LittleEndian.PutUint64(b[40:], sig)
}

// headerSig returns the signature hash of a rendezvous header (0: none).
func headerSig(b []byte) uint64 {
	if len(b) < rdvExtSize {
		return 0
	}
	return binary.LittleEndian.Uint64(b[40:])
}

// signature is the hash of the type signature of layout u's n bytes (0:
// unchecked).
func (u *typedRecv) signature() uint64 {
	s, err := u.sigPrefix(u.n)
	if err != nil {
		return 0
	}
	return s.Hash
}

// sigPrefix returns the type signature of the first n stream bytes of
// layout u. The parts' signatures are joined in order; a layout of
// several parts one of which holds only bytes is untyped as a whole
// (hash 0: the message is not checked), so that bytes stand for any data
// in a multi-part message as they do in a single one.
func (u *typedRecv) sigPrefix(n int) (ddt.Sig, error) {
	if u.parts == nil {
		return u.t.SigOf(u.count, int64(n))
	}
	var s ddt.Sig
	start := 0
	for i, p := range u.parts {
		size := u.ends[i] - start
		if size == 0 {
			continue
		}
		full, err := p.Type.SigOf(p.Count, int64(size))
		if err != nil {
			return ddt.Sig{}, err
		}
		if full.Hash == 0 { // a part of bytes
			return ddt.Sig{}, nil
		}
		if start < n {
			ps := full
			if k := n - start; k < size {
				if ps, err = p.Type.SigOf(p.Count, int64(k)); err != nil {
					return ddt.Sig{}, err
				}
			}
			s = s.Then(ps)
		}
		start = u.ends[i]
	}
	return s, nil
}

// sigWord folds a signature hash into the 32-bit word the node
// transport's ring cells carry (0 stays 0: untyped).
func sigWord(h uint64) uint32 {
	if h == 0 {
		return 0
	}
	if w := uint32(h) ^ uint32(h>>32); w != 0 {
		return w
	}
	return 1
}

// checkSignature applies MPI's type-signature rule to a typed receive r
// and a message of size bytes whose signature hashes to sig: the
// message's signature must be the prefix of the receive's that covers as
// many bytes. Untyped messages or receives (hash 0) and messages longer
// than the receive (a truncation) are not checked.
func checkSignature(r *Request, sig, size uint64) error {
	if sig == 0 {
		return nil
	}
	return checkSig(r, size, func(h uint64) bool { return h == sig })
}

// checkSigWord is checkSignature for a message of the node transport's
// rings, which carry the signature folded into 32 bits (sigWord).
func checkSigWord(r *Request, word uint32, size uint64) error {
	if word == 0 {
		return nil
	}
	return checkSig(r, size, func(h uint64) bool { return sigWord(h) == word })
}

func checkSig(r *Request, size uint64, same func(h uint64) bool) error {
	if r.reqExt == nil {
		return nil
	}
	u := r.typed
	if u == nil {
		u = r.sigLayout
	}
	if u == nil || size > uint64(u.n) {
		return nil
	}
	s, err := u.sigPrefix(int(size))
	if err == nil && (s.Hash == 0 || same(s.Hash)) {
		return nil
	}
	return fmt.Errorf("endpoint: message of %d bytes from rank %d does not match the type signature of %s: %w",
		size, tagSource(r.want), u.sigName(), ErrInvalid)
}

// sigName names the layout in a signature error.
func (u *typedRecv) sigName() string {
	if u.parts == nil {
		return fmt.Sprintf("%d elements of %s", u.count, u.t)
	}
	return u.String()
}

// headerExt returns the protocol word of a rendezvous header (0 for the
// plain 32-byte header).
func headerExt(b []byte) uint64 {
	if len(b) < rdvExtSize {
		return modePlain
	}
	return binary.LittleEndian.Uint64(b[32:])
}

// typedPath is the protocol a typed message above the eager limit takes
// towards a libfabric peer.
type typedPath uint8

const (
	pathPack typedPath = iota
	pathZeroCopy
	pathPipeline
)

// chooseTyped applies the cost model (docs/endpoint.md, "Which path"):
// zero copy when the layout's blocks average at least zcblock bytes and
// number at most maxIovSegs; else, below v's pipeMin, packed whole into
// a staging buffer and sent by one rendezvous (host memory only); else
// the segment pipeline. WEFT_TUNE's typedpath overrides it. For zero
// copy the blocks are in x.pieces.
func (v *vci) chooseTyped(u *typedRecv, x *reqExt) typedPath {
	var ok bool
	switch typedPathSetting() {
	case "pack":
		return pathPack
	case "pipeline":
		return pathPipeline
	case "zerocopy":
		x.pieces, ok = x.appendPieces(x.pieces[:0], u, maxIovSegs)
	default:
		if x.pieces, ok = x.appendLargePieces(x.pieces[:0], u); !ok && u.dev == nil && u.n < v.pipeMin() {
			return pathPack
		}
	}
	if ok {
		return pathZeroCopy
	}
	return pathPipeline
}

// pipeMin is the packed size from which a typed message of small blocks
// to a libfabric peer goes by the segment pipeline rather than packed
// whole (WEFT_TUNE pipemin). Unset, it is maxStageBytes on shm and tcp:
// there one rendezvous of the packed message beat the pipeline's many
// small messages at every size measured (docs/perf/typed.md), and up to
// that size its staging buffer is reused; elsewhere (verbs) the
// pipeline, whose packs overlap the NIC's transfers.
func (v *vci) pipeMin() int {
	if tune.IsSet("pipemin") {
		return int(min(tune.PipeMin, math.MaxInt))
	}
	if v.info != nil && (strings.HasPrefix(v.info.Provider, "shm") || strings.HasPrefix(v.info.Provider, "tcp")) {
		return maxStageBytes
	}
	return 0
}

// pathOverride and zcOverride replace WEFT_TUNE's typedpath and zcblock
// when set (benchmarks and tests of one process compare the paths).
var (
	pathOverride atomic.Pointer[string]
	zcOverride   atomic.Int64
)

func typedPathSetting() string {
	if p := pathOverride.Load(); p != nil {
		return *p
	}
	return tune.TypedPath
}

func zcBlockSetting() int {
	if z := zcOverride.Load(); z > 0 {
		return int(z)
	}
	return int(max(tune.ZCBlock, 1))
}

// appendLargePieces is appendPieces when the layout's blocks average at
// least zcblock bytes (the cost model's threshold); otherwise ok is
// false and dst comes back as it was. The bound on the block count that
// follows from the average makes a layout of many small blocks cost next
// to nothing here.
func (x *reqExt) appendLargePieces(dst [][]byte, u *typedRecv) ([][]byte, bool) {
	zc := zcBlockSetting()
	out, ok := x.appendPieces(dst, u, min(maxIovSegs, max(1, u.n/zc)))
	if !ok {
		return dst, false
	}
	if k := len(out) - len(dst); k == 0 || u.n/k < zc {
		clear(out[len(dst):])
		return dst, false
	}
	return out, true
}

// appendPieces appends the layout's contiguous blocks in stream order,
// as slices of the user's buffers, to dst; with more than maxSegs blocks
// (or GPU memory) ok is false and dst comes back as it was. x.segs is
// the scratch the blocks are listed in, kept for reuse.
func (x *reqExt) appendPieces(dst [][]byte, u *typedRecv, maxSegs int) ([][]byte, bool) {
	if u.dev != nil { // GPU memory: no host blocks to read or write
		return dst, false
	}
	start := len(dst)
	add := func(buf []byte, count int, t *ddt.Type) bool {
		left := maxSegs - (len(dst) - start)
		if left <= 0 {
			return false
		}
		// A layout with more blocks than allowed by its type's
		// description is refused without a walk of its blocks.
		if t.ExceedsSegments(count, left) {
			return false
		}
		segs, err := t.AppendSegments(x.segs[:0], count, left)
		x.segs = segs[:0]
		if err != nil {
			return false
		}
		for _, s := range segs {
			if s.Len > 0 {
				dst = append(dst, buf[s.Off:s.Off+s.Len:s.Off+s.Len])
			}
		}
		return true
	}
	ok := true
	if u.parts == nil {
		ok = add(u.buf, u.count, u.t)
	} else {
		for _, p := range u.parts {
			if ok = add(p.Buf, p.Count, p.Type); !ok {
				break
			}
		}
	}
	if !ok {
		clear(dst[start:])
		return dst[:start], false
	}
	return dst, true
}

// buffers calls f for each user buffer of the layout.
func (u *typedRecv) buffers(f func(b []byte)) {
	if u.dev != nil {
		return
	}
	if u.parts == nil {
		f(u.buf)
		return
	}
	for _, p := range u.parts {
		f(p.Buf)
	}
}

// isendFabricTyped sends the non-contiguous message of layout in to a
// libfabric peer without packing it into a buffer of its own (see the
// top of this file). done is false when the message takes the packed
// path instead (typedpath=pack above the eager limit, a node peer).
func (c *Comm) isendFabricTyped(in *typedRecv, dest, tag int) (r *Request, done bool, err error) {
	if c.link(dest) != nil { // node peers have their own typed paths
		return nil, false, nil
	}
	v := c.v
	if in.n <= v.eagerLimit {
		return c.isendEagerTyped(in, dest, tag)
	}
	if typedPathSetting() == "pack" {
		return nil, false, nil
	}
	v.lock()
	defer v.unlock()
	if _, err := v.beginSend(); err != nil { // a queued header still goes after the queue (submit)
		return nil, true, err
	}
	// A released request and its extension, kept with their buffers: a
	// repeated transfer allocates nothing.
	t := packTag(c.ctx, c.slots[dest], c.rank, tag)
	r = v.newSend(c, kSendRdv, nil, dest)
	x := r.ext()
	x.qtag, x.qdest = t|rtsBit, c.addrs[dest]
	x.layout = *in // a pipelined send packs from it later
	u := &x.layout
	path := v.chooseTyped(u, x)
	if path == pathPack || path == pathPipeline && !v.ensureSegs() {
		v.keepReleased(r) // packed whole (isendPackedStaged)
		return nil, false, nil
	}
	v.seq++
	r.seq = v.seq
	hl := v.hdrLen()
	if x.fhdr == nil {
		x.fhdr = make([]byte, matchHdrSize+rdvExtSize)
	}
	r.qdata = x.fhdr[:hl+rdvExtSize] // behind the reserved match header
	h := rdvHeader{size: uint64(u.n), seq: r.seq}
	ext := uint64(modePipe)
	if path == pathZeroCopy {
		if h.addr, h.key, err = v.publishBlocks(r, u); err != nil {
			r.unpinAll()
			return nil, true, err
		}
		ext = modeTable | uint64(len(x.pieces))<<8
		pathStats.zeroCopy.Add(1)
	} else {
		x.pipeMem = pipeSend{u: u, want: u.n}
		r.pipe = &x.pipeMem
		if u.dev != nil {
			r.pipe.ring = v.ensureDevRing(u.dev.Buf.Device())
		}
		pathStats.pipeline.Add(1)
	}
	h.put(r.qdata[hl:])
	putExt(r.qdata[hl:], ext, u.signature())
	if len(r.qdata) <= v.info.InjectSize {
		r.qinject = true
	} else {
		r.pinBuf(r.qdata)
	}
	v.rdvSends[r.seq] = r
	if err := v.submit(r); err != nil {
		delete(v.rdvSends, r.seq)
		r.unpinAll()
		v.freeSlot(r)
		return nil, true, fmt.Errorf("endpoint: rendezvous header to rank %d: %w", dest, err)
	}
	return r, true, nil
}

// publishBlocks registers the buffers of layout u for remote reads and
// builds the table of its blocks (r's pieces: remote address, length,
// key) the receiver reads first; it returns the table's remote address
// and key. The registrations (which pin the Go memory) are r's until the
// FIN; the table is r's own, kept with its extension, so that a repeated
// send registers the same table again, a hit of the MR cache.
func (v *vci) publishBlocks(r *Request, u *typedRecv) (addr, key uint64, err error) {
	x := r.reqExt
	u.buffers(func(b []byte) {
		if err != nil || len(b) == 0 {
			return
		}
		if _, e := v.regKeep(x, b, fabric.AccessRemoteRead|fabric.AccessSend); e != nil {
			err = fmt.Errorf("endpoint: register %d-byte typed send buffer: %w", len(b), e)
		}
	})
	if err != nil {
		return 0, 0, err
	}
	mrs := x.mrs
	if cap(x.tbl) < 3*len(x.pieces) {
		x.tbl = make([]uint64, 3*len(x.pieces))
	}
	tbl := x.tbl[:3*len(x.pieces)]
	m := 0
	for i, p := range x.pieces {
		// Pieces come part after part; a registration the cache served
		// may cover more than its part, and serves any piece inside it.
		for m < len(mrs) && mrs[m].RemoteAddr(p) == ^uint64(0) {
			m++
		}
		if m == len(mrs) {
			return 0, 0, fmt.Errorf("endpoint: typed send: block %d outside its buffer: %w", i, ErrInvalid)
		}
		tbl[3*i], tbl[3*i+1], tbl[3*i+2] = mrs[m].RemoteAddr(p), uint64(len(p)), mrs[m].Key()
	}
	tb := unsafe.Slice((*byte)(unsafe.Pointer(&tbl[0])), 8*len(tbl))
	tmr, err := v.regKeep(x, tb, fabric.AccessRemoteRead)
	if err != nil {
		return 0, 0, fmt.Errorf("endpoint: register block table: %w", err)
	}
	r.iov = tbl // kept alive (and pinned by its registration) until the FIN
	return tmr.RemoteAddr(tb), tmr.Key(), nil
}

// within reports whether p lies inside b.
func within(p, b []byte) bool {
	pp := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	bp := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pp >= bp && pp+uintptr(len(p)) <= bp+uintptr(len(b))
}

// offsetIn is the offset of p in b (p lies within b).
func offsetIn(p, b []byte) int64 {
	return int64(uintptr(unsafe.Pointer(unsafe.SliceData(p))) - uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// isendEagerTyped packs an eager typed message straight into what the
// provider sends from: the inject scratch (inject-sized) or a registered
// segment buffer, released when the send completes; when every segment
// buffer is in use (or too small), into a buffer of its own
// (isendEagerFresh). done is false only above the eager limit.
func (c *Comm) isendEagerTyped(u *typedRecv, dest, tag int) (*Request, bool, error) {
	v := c.v
	v.lock()
	defer v.unlock()
	queued, err := v.beginSend()
	if err != nil {
		return nil, true, err
	}
	t := packTag(c.ctx, c.slots[dest], c.rank, tag) | rtsBit
	addr := c.addrs[dest]
	hl := v.hdrLen() // reserved in front of each buffer for the match header
	m := rdvExtSize + u.n
	// GPU data goes to a segment buffer, packed there in place by one
	// kernel, rather than through the device's staging buffer into the
	// inline scratch (Go memory, which the device cannot map).
	if m <= v.injectLimit && (u.dev == nil || !v.ensureSegs()) {
		b := v.inlineScratch(hl + m)
		inlineHeader(b[hl:], u)
		if err := u.pack(0, b[hl+rdvExtSize:]); err != nil {
			return nil, true, fmt.Errorf("endpoint: pack %s: %w", u.String(), err)
		}
		pathStats.eager.Add(1)
		if !queued {
			err := v.tryPost(func() error { return v.injectFramed(b, t, addr) })
			if err == nil {
				return completedRequest, true, nil
			}
			if !errors.Is(err, fabric.ErrAgain) {
				return nil, true, fmt.Errorf("endpoint: send %d bytes to rank %d: %w", u.n, dest, err)
			}
		}
		// The provider cannot take it now: queue a copy, as an inject
		// would have copied it; progress posts it, in order.
		r := &Request{v: v, c: c, kind: kSendEager, state: stPosted, qrank: dest,
			reqExt: &reqExt{qinject: true, qdata: append([]byte(nil), b...), qtag: t, qdest: addr}}
		v.enqueue(r)
		return r, true, nil
	}
	if m > v.eagerLimit {
		return nil, false, nil
	}
	if !v.ensureSegs() || m > v.segSize {
		return c.isendEagerFresh(u, t, addr, dest)
	}
	idx, ok := v.takeSeg()
	if !ok {
		return c.isendEagerFresh(u, t, addr, dest)
	}
	b := v.segs[idx][:hl+m]
	inlineHeader(b[hl:], u)
	if err := u.pack(0, b[hl+rdvExtSize:]); err != nil {
		v.segFree = append(v.segFree, idx)
		return nil, true, fmt.Errorf("endpoint: pack %s: %w", u.String(), err)
	}
	r := v.newSend(c, kSendEager, nil, dest)
	x := r.ext()
	x.qdata, x.qdesc, x.qtag, x.qdest, x.segIdx = b, v.segDesc, t, addr, idx+1
	if err := v.submit(r); err != nil {
		v.freeSlot(r)
		v.segFree = append(v.segFree, idx)
		return nil, true, fmt.Errorf("endpoint: send %d bytes to rank %d: %w", u.n, dest, err)
	}
	pathStats.eager.Add(1)
	return r, true, nil
}

// inlineHeader writes the header of an eager typed message of layout u
// into b's first rdvExtSize bytes.
func inlineHeader(b []byte, u *typedRecv) {
	rdvHeader{size: uint64(u.n)}.put(b)
	putExt(b, modeInline, u.signature())
}

// deliverInline completes receive r with an eager typed message (header
// h, data following it in payload).
func (v *vci) deliverInline(r *Request, t uint64, h rdvHeader, payload []byte) {
	data := payload[min(len(payload), rdvExtSize):]
	if uint64(len(data)) != h.size {
		v.finish(r, fmt.Errorf("endpoint: typed message of %d bytes announces %d: %w", len(data), h.size, ErrInvalid))
		return
	}
	r.st = Status{Source: tagSource(t), Tag: tagUser(t)}
	if err := checkSignature(r, headerSig(payload), h.size); err != nil {
		v.finish(r, err)
		return
	}
	r.take(0, data)
	c := r.capacity()
	r.st.Count = min(len(data), c)
	var err error
	if len(data) > c {
		err = fmt.Errorf("endpoint: message of %d bytes from rank %d into %d: %w", len(data), r.st.Source, c, ErrTruncated)
	}
	v.finish(r, err)
}

// isendContigTyped sends a typed message whose layout is one contiguous
// block: in place, as Isend sends bytes; to a libfabric peer with its
// type signature (eagerly with the signature's header, or in the
// rendezvous header), so that the receiver can check it.
func (c *Comm) isendContigTyped(contig, buf []byte, count int, t *ddt.Type, n, dest, tag int, blocking bool) (*Request, error) {
	if t == ddt.Byte || n == 0 {
		return c.isendMode(contig, dest, tag, c.ctx, 0, blocking)
	}
	su := typedRecv{buf: buf, count: count, t: t, n: n} // on the stack
	sig := su.signature()
	if sig == 0 {
		return c.isendMode(contig, dest, tag, c.ctx, 0, blocking)
	}
	if c.link(dest) == nil && n+rdvExtSize <= c.v.eagerLimit {
		// Within the eager limit isendEagerTyped always sends it.
		r, _, err := c.isendEagerTyped(&typedRecv{buf: buf, count: count, t: t, n: n}, dest, tag)
		return r, err
	}
	return c.isendMode(contig, dest, tag, c.ctx, sig, blocking)
}

// isendEagerFresh is isendEagerTyped's send from a buffer of its own,
// when no segment buffer is free or large enough: the message still
// carries its type signature, so that the receiver checks it. Caller
// holds the lock.
func (c *Comm) isendEagerFresh(u *typedRecv, t uint64, addr fabric.Addr, dest int) (*Request, bool, error) {
	v := c.v
	hl := v.hdrLen()
	b := make([]byte, hl+rdvExtSize+u.n)
	inlineHeader(b[hl:], u)
	if err := u.pack(0, b[hl+rdvExtSize:]); err != nil {
		return nil, true, fmt.Errorf("endpoint: pack %s: %w", u.String(), err)
	}
	r := &Request{v: v, c: c, kind: kSendEager, state: stPosted, qrank: dest,
		reqExt: &reqExt{qdata: b, qtag: t, qdest: addr}}
	if v.mrLocal {
		mr, err := v.dom.Register(b, fabric.AccessSend)
		if err != nil {
			return nil, true, fmt.Errorf("endpoint: register send buffer: %w", err)
		}
		r.mr, r.qdesc = mr, mr.Desc()
	}
	r.pinBuf(b)
	if err := v.submit(r); err != nil {
		r.unpinAll()
		v.freeSlot(r)
		return nil, true, fmt.Errorf("endpoint: send %d bytes to rank %d: %w", u.n, dest, err)
	}
	pathStats.eager.Add(1)
	return r, true, nil
}

// ensureSegs allocates the endpoint's ring of registered segment buffers
// (WEFT_TUNE pipeseg × pipedepth) on first use; false when it cannot.
func (v *vci) ensureSegs() bool {
	if v.segBuf != nil {
		return true
	}
	if v.segFailed || v.dom == nil {
		return false
	}
	size := int(min(tune.PipeSeg, int64(v.eagerLimit)))
	depth := int(tune.PipeDepth)
	v.pipeSize = min(v.pipeSeg(), size) - v.hdrLen()
	b, err := v.dom.Alloc(size * depth)
	if err != nil {
		v.segFailed = true
		v.log.Warn("no segment buffers for typed sends; packing into fresh buffers", "err", err)
		return false
	}
	// Each buffer reserves the match header in front of its payload
	// (segSize bytes): a segment with its header stays within pipeseg, a
	// provider's own eager threshold (tcp;ofi_rxm orders its eager and
	// rendezvous messages apart).
	v.segBuf, v.segDesc, v.segSize = b, b.Desc(), size-v.hdrLen()
	all := b.Bytes()
	for i := 0; i < depth; i++ {
		v.segs = append(v.segs, all[i*size:(i+1)*size:(i+1)*size])
		v.segFree = append(v.segFree, i)
	}
	return true
}

// injectSeg is the smallest provider inject size that pipeSeg takes as
// the pipeline's segment size.
const injectSeg = 4 << 10

// pipeSeg is the size of the segments of v's pipelined typed messages
// (with their match header; the segment buffers themselves hold an eager
// typed message of up to pipeseg bytes): WEFT_TUNE's pipeseg when set;
// otherwise the provider's inject size where that is at least injectSeg
// (shm, 4 KiB: it moves messages up to its inject size through its own
// buffers and larger ones by a slower protocol; 1 MiB of 8–4096-byte
// blocks went in 350–380 µs in 4 KiB segments against 450–490 in 16 KiB
// ones and 630–710 in 8 KiB ones), else pipeseg's default (tcp;ofi_rxm,
// inject size 64: 16 KiB segments 1.5–3× faster than 4 KiB ones);
// docs/perf/typed.md.
func (v *vci) pipeSeg() int {
	seg := tune.PipeSeg
	if !tune.IsSet("pipeseg") && v.info != nil && v.info.InjectSize >= injectSeg {
		seg = int64(v.info.InjectSize)
	}
	return int(min(seg, int64(v.eagerLimit)))
}

// takeSeg takes a free segment buffer.
func (v *vci) takeSeg() (int, bool) {
	n := len(v.segFree)
	if n == 0 {
		return 0, false
	}
	i := v.segFree[n-1]
	v.segFree = v.segFree[:n-1]
	return i, true
}

// pipeSend is the sender's state of a pipelined typed message.
type pipeSend struct {
	u        *typedRecv
	want     int    // bytes the receiver takes (CTS)
	off      int    // stream bytes posted so far
	token    uint64 // the receiver's request token (CTS)
	started  bool   // CTS arrived
	ready    int    // segment buffer index+1 packed but not yet posted
	readyLen int
	stalled  time.Time // when the provider first refused the current segment
	listed   bool      // in v.pipes
	// A GPU send with a device ring (gputyped.go): segments packed up
	// to enq, their kernels in flight in inflight, in order.
	ring     *devRing
	enq      int
	inflight []devSeg
	// A contiguous GPU send on an hmem ring goes straight from the
	// user's buffer, registered for the message (direct, from directAddr
	// with directDesc); directTried once that was decided.
	direct, directTried bool
	directAddr          uint64
	directDesc          fabric.Desc
}

// pipeCtrl handles a pipeline control message: a CTS for one of v's
// pipelined sends, or a data segment for one of its receives.
func (v *vci) pipeCtrl(t uint64, payload []byte) {
	if t&pipeDataBit != 0 {
		tok := int(t & pipeTokMask)
		seq := t >> pipeTokBits & pipeSeqMask
		if tok <= 0 || tok > len(v.slots) {
			v.log.Warn("pipeline segment for unknown receive", "token", tok)
			return
		}
		r := v.slots[tok-1]
		if r == nil || r.reqExt == nil || !r.piping || r.finSeq&pipeSeqMask != seq {
			v.log.Debug("pipeline segment for a finished receive dropped", "token", tok)
			return
		}
		if u := r.typed; u == nil || u.dev == nil || u.rx == nil || !v.devLandTake(r, r.pipeGot, payload) {
			r.take(r.pipeGot, payload)
		}
		r.pipeGot += len(payload)
		if r.pipeGot >= r.st.Count {
			v.pipeRecvDone(r)
		}
		return
	}
	r := v.rdvSends[ctrlSeq(t)&^pipeDataBit]
	if r == nil || r.pipe == nil || len(payload) < 16 {
		v.log.Warn("CTS for unknown pipelined send", "seq", ctrlSeq(t))
		return
	}
	delete(v.rdvSends, r.seq)
	p := r.pipe
	p.token = binary.LittleEndian.Uint64(payload)
	p.want = min(p.want, int(binary.LittleEndian.Uint64(payload[8:])))
	p.started = true
	if !p.listed {
		p.listed = true
		v.pipes = append(v.pipes, r)
	}
	v.pump(r)
}

// pump packs and posts the segments of pipelined send r while segment
// buffers are free and the provider takes them; the send completes when
// every segment is posted and its send completion has come back.
func (v *vci) pump(r *Request) {
	p := r.pipe
	if p.ring != nil {
		v.pumpDev(r)
		return
	}
	if r.state == stDone {
		return
	}
	data := ctrlBit | rtsBit | pipeDataBit | (r.seq&pipeSeqMask)<<pipeTokBits | p.token&pipeTokMask
	for p.off < p.want || p.ready != 0 {
		if p.ready == 0 {
			idx, ok := v.takeSeg()
			if !ok {
				break
			}
			k := min(v.pipeSize, p.want-p.off)
			if err := p.u.pack(p.off, v.segs[idx][v.hdrLen():v.hdrLen()+k]); err != nil {
				v.segFree = append(v.segFree, idx)
				v.finish(r, fmt.Errorf("endpoint: pack %s: %w", p.u, err))
				return
			}
			p.ready, p.readyLen = idx+1, k
		}
		idx := p.ready - 1
		err := v.sendFramed(v.segs[idx][:v.hdrLen()+p.readyLen], v.segDesc, data, r.qdest, v.handle(r)|segBit|uint64(idx)<<32)
		if !v.segPosted(r, err, v.finish) {
			return
		}
		p.ready = 0
		p.off += p.readyLen
		r.pending++
	}
	if p.off == p.want && p.ready == 0 && r.pending == 0 {
		v.finish(r, nil)
	}
}

// segPosted handles the outcome err of posting one segment of pipelined
// send r: true when it went; false when the provider's queue is full (r
// fails with fail once it has stayed full for v's timeout) or on another
// error, which fails r.
func (v *vci) segPosted(r *Request, err error, fail func(*Request, error)) bool {
	p := r.pipe
	if errors.Is(err, fabric.ErrAgain) {
		if p.stalled.IsZero() {
			p.stalled = time.Now()
		} else if time.Since(p.stalled) > v.timeout {
			fail(r, fmt.Errorf("endpoint: pipelined send to rank %d: queue stayed full for %v: %w", r.qrank, v.timeout, err))
		}
		return false
	}
	if err != nil {
		fail(r, fmt.Errorf("endpoint: pipelined send to rank %d: %w", r.qrank, err))
		return false
	}
	p.stalled = time.Time{}
	return true
}

// pumpAll drives every pipelined send of v and drops finished ones.
func (v *vci) pumpAll() {
	n := 0
	for _, r := range v.pipes {
		v.pump(r)
		if r.state != stDone {
			v.pipes[n] = r
			n++
		} else {
			r.pipe.listed = false
		}
	}
	clear(v.pipes[n:])
	v.pipes = v.pipes[:n]
}

// segDone handles the send completion (or error) of one pipeline segment.
func (v *vci) segDone(r *Request, ctx uint64, err error) {
	if r.reqExt != nil && r.pipe != nil && r.pipe.ring != nil {
		if ctx&directBit == 0 {
			r.pipe.ring.release(int(ctx>>32&0xff), 1)
		}
	} else {
		v.segFree = append(v.segFree, int(ctx>>32&0xff))
	}
	if err != nil {
		if r.reqExt != nil && r.pipe != nil && r.pipe.ring != nil {
			v.failDev(r, fmt.Errorf("endpoint: pipelined send to rank %d: %w", r.qrank, err))
			return
		}
		v.finish(r, fmt.Errorf("endpoint: pipelined send to rank %d: %w", r.qrank, err))
		return
	}
	if r.state == stDone {
		v.maybeRetire(r)
		return
	}
	v.pump(r)
}

// startPipeRecv matches receive r with pipelined message header h from
// rank src: it answers with a CTS naming r (its slot) and the bytes it
// takes; the segments are then unpacked as they arrive (pipeCtrl). A
// receive whose type signature does not match (reject) takes no bytes
// and completes with that error.
func (v *vci) startPipeRecv(r *Request, t uint64, h rdvHeader, reject error) {
	src := tagSource(t)
	r.st = Status{Source: src, Tag: tagUser(t)}
	if src >= len(r.c.addrs) {
		v.finish(r, fmt.Errorf("endpoint: rendezvous from unknown rank %d", src))
		return
	}
	c := r.capacity()
	want := int(min(uint64(c), h.size))
	if reject != nil {
		want = 0
	}
	r.st.Count = want
	x := r.ext()
	x.piping = true
	x.pipeGot = 0
	x.finSeq = h.seq
	x.finDest = r.c.addrs[src]
	x.pipeTrunc = h.size > uint64(c)
	x.cts = true
	x.finNeeded = true
	r.state = stReading
	v.handle(r)
	if err := v.sendFin(r); err != nil {
		if errors.Is(err, fabric.ErrAgain) {
			v.deferFin = append(v.deferFin, r)
		} else {
			r.finNeeded = false
			x.piping = false
			v.finish(r, fmt.Errorf("endpoint: CTS to rank %d: %w", src, err))
			return
		}
	}
	if reject != nil {
		r.piping = false
		v.finish(r, reject)
		return
	}
	if want == 0 {
		v.pipeRecvDone(r)
	}
}

// pipeRecvDone completes a pipelined receive once all it takes arrived.
func (v *vci) pipeRecvDone(r *Request) {
	r.piping = false
	if r.land != nil {
		r.land.flush() // the last, partly filled chunk of a GPU receive (gputyped.go)
	}
	var err error
	if r.pipeTrunc {
		err = fmt.Errorf("endpoint: pipelined message from rank %d into %d bytes: %w", r.st.Source, r.capacity(), ErrTruncated)
	}
	v.finish(r, err)
}

// sendCTS sends the CTS of pipelined receive r.
func (v *vci) sendCTS(r *Request) error {
	b := v.ctrlFrame(v.ctrlOut[:matchHdrSize+16]) // (injected: copied before the call returns)
	binary.LittleEndian.PutUint64(b[v.hdrLen():], uint64(r.slot))
	binary.LittleEndian.PutUint64(b[v.hdrLen()+8:], uint64(r.st.Count))
	if err := v.injectFramed(b, ctrlBit|rtsBit|r.finSeq&ctrlSeqMax&^pipeDataBit, r.finDest); err != nil {
		return err
	}
	r.finNeeded, r.cts = false, false
	return nil
}

// rdvRead is one RMA read of a rendezvous receive: a remote contiguous
// range scattered into at most iov_limit local pieces.
type rdvRead struct {
	raddr, key uint64
	iov        []fabric.IOV
}

// rdvReads is a rendezvous receive's plan: the sender's block table while
// it is being read, then the reads, posted a window at a time.
type rdvReads struct {
	n        int      // stream bytes taken
	local    [][]byte // where they go, in stream order
	tbl      []uint64 // the sender's table (modeTable), read first
	tblPhase bool
	ops      []rdvRead
	used     int // the most ops the plan has held (reset clears them)
	next     int
	err      error
	deferred bool // in v.deferRead
}

// planReads starts the rendezvous read of receive r (n stream bytes of
// the message of header h, ext its protocol word): it works out where
// the bytes land (the user's blocks, or a buffer unpacked at the end when
// they are small) and posts the table read or the first reads.
func (v *vci) planReads(r *Request, h rdvHeader, ext uint64, n int) {
	x := r.reqExt // (startRead made it)
	rd := &x.rdMem
	*rd = rdvReads{n: n, ops: rd.ops[:0], used: rd.used, local: rd.local[:0], tbl: rd.tbl[:0]}
	r.rd = rd
	if r.typed != nil {
		u := r.typed
		var large bool
		if typedPathSetting() != "pack" {
			rd.local, large = x.appendLargePieces(rd.local, u) // (its own: reset clears it)
		}
		if large {
			pathStats.recvBlocks.Add(1)
			u.buffers(func(b []byte) {
				if len(b) > 0 {
					r.pin.Pin(&b[0])
					r.pinned = true
				}
			})
		} else {
			// Many small blocks: read into a staging buffer of the
			// endpoint's (reused), unpack it when the receive completes.
			pathStats.recvUnpack.Add(1)
			r.buf, r.staged = v.stage(n), true
			r.unpack, r.typed = u, nil
		}
	}
	if len(rd.local) == 0 {
		rd.local = append(rd.local, r.buf[:n])
		r.pinBuf(r.buf[:n])
	}
	if v.mrLocal {
		// Providers that want local descriptors: one registration per
		// local piece (the MR cache serves the repeats).
		for _, b := range rd.local {
			if _, err := v.regKeep(x, b, fabric.AccessRead|fabric.AccessRecv); err != nil {
				rd.err = err
				break
			}
		}
	}
	switch {
	case rd.err != nil:
	case ext&0xff == modeTable:
		nsegs := int(ext >> 8)
		if nsegs <= 0 || nsegs > maxIovSegs {
			rd.err = fmt.Errorf("endpoint: block table of %d blocks: %w", nsegs, ErrInvalid)
			break
		}
		if cap(rd.tbl) < 3*nsegs {
			rd.tbl = make([]uint64, 3*nsegs)
		}
		rd.tbl = rd.tbl[:3*nsegs]
		tb := unsafe.Slice((*byte)(unsafe.Pointer(&rd.tbl[0])), 8*len(rd.tbl))
		r.pin.Pin(&rd.tbl[0])
		r.pinned = true
		rd.tblPhase = true
		var desc fabric.Desc
		if v.mrLocal {
			mr, err := v.regKeep(x, tb, fabric.AccessRead|fabric.AccessRecv)
			if err != nil {
				rd.err = err
				break
			}
			desc = mr.Desc()
		}
		op := rd.addOp(h.addr, h.key)
		op.iov = append(op.iov, fabric.IOV{Buf: tb, Desc: desc})
	default:
		rd.buildOps(v, []uint64{h.addr, uint64(n), h.key}, r.mrs)
	}
	v.readStep(r)
}

// addOp appends a read from raddr with key to the plan, its local pieces
// empty: the array of an earlier plan's read in that place is reused
// (reset cleared it).
func (rd *rdvReads) addOp(raddr, key uint64) *rdvRead {
	k := len(rd.ops)
	var iov []fabric.IOV
	if k < cap(rd.ops) {
		iov = rd.ops[:k+1][k].iov[:0]
	}
	rd.ops = append(rd.ops, rdvRead{raddr: raddr, key: key, iov: iov})
	rd.used = max(rd.used, k+1)
	return &rd.ops[k]
}

// buildOps splits the reads of rd.n bytes from the remote blocks (triples
// of address, length, key) into its local pieces (mrs: their
// registrations, one per piece, when the provider wants descriptors).
func (rd *rdvReads) buildOps(v *vci, remote []uint64, mrs []*fabric.MR) {
	lim := max(1, min(v.info.IOVLimit, fabric.MaxIOV))
	rd.ops, rd.next = rd.ops[:0], 0
	li, loff, left := 0, 0, rd.n
	for ri := 0; left > 0 && 3*ri+2 < len(remote); ri++ {
		raddr, rlen, key := remote[3*ri], int(remote[3*ri+1]), remote[3*ri+2]
		roff := 0
		for roff < rlen && left > 0 {
			op := rd.addOp(raddr+uint64(roff), key)
			take := min(rlen-roff, left)
			for take > 0 && len(op.iov) < lim {
				lp := rd.local[li][loff:]
				k := min(len(lp), take)
				var desc fabric.Desc
				if li < len(mrs) {
					desc = mrs[li].Desc()
				}
				op.iov = append(op.iov, fabric.IOV{Buf: lp[:k], Desc: desc})
				take, left, roff, loff = take-k, left-k, roff+k, loff+k
				if loff == len(rd.local[li]) {
					li, loff = li+1, 0
				}
			}
		}
	}
	if left > 0 {
		rd.err = fmt.Errorf("endpoint: rendezvous blocks hold %d bytes fewer than announced: %w", left, ErrInvalid)
	}
}

// readStep advances rendezvous receive r after a completion (or at its
// start): the table read done, the reads are planned; more reads are
// posted while the window allows; when every read is done (or one failed
// and the rest are back) the FIN goes out.
func (v *vci) readStep(r *Request) {
	rd := r.rd
	if rd.err == nil && rd.tblPhase && r.pending == 0 && rd.next == len(rd.ops) {
		rd.tblPhase = false
		var total uint64
		for i := 1; i < len(rd.tbl); i += 3 {
			total += rd.tbl[i]
		}
		if total < uint64(rd.n) {
			rd.err = fmt.Errorf("endpoint: block table of %d bytes for %d: %w", total, rd.n, ErrInvalid)
		} else {
			rd.buildOps(v, rd.tbl, r.mrs)
		}
	}
	for rd.err == nil && rd.next < len(rd.ops) && r.pending < maxReadsInFlight {
		op := &rd.ops[rd.next]
		var err error
		if len(op.iov) == 1 {
			err = v.ep.Read(op.iov[0].Buf, op.iov[0].Desc, r.finDest, op.raddr, op.key, v.handle(r))
		} else {
			err = v.ep.ReadV(op.iov, r.finDest, op.raddr, op.key, v.handle(r))
		}
		if errors.Is(err, fabric.ErrAgain) {
			if r.pending == 0 && !rd.deferred {
				rd.deferred = true
				v.deferRead = append(v.deferRead, r)
			}
			return
		}
		if err != nil {
			rd.err = err
			break
		}
		rd.next++
		r.pending++
	}
	if r.pending > 0 || (rd.err == nil && rd.next < len(rd.ops)) || rd.tblPhase && rd.err == nil {
		return
	}
	v.readDone(r, rd.err)
}
