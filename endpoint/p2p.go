package endpoint

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/internal/peerwatch"
)

func (c *Comm) checkPeer(rank int, wildcardOK bool) error {
	if c.ok() && (rank >= 0 && rank < c.size || rank == AnySource && wildcardOK) {
		return nil
	}
	return c.badPeer(rank)
}

func (c *Comm) badPeer(rank int) error {
	if err := c.usable("point-to-point"); err != nil {
		return err
	}
	return fmt.Errorf("endpoint: rank %d outside 0..%d: %w", rank, c.size-1, ErrInvalid)
}

// CheckPeer returns an error wrapping ErrPeerGone when the process of
// rank (of the communicator, or of the remote group of an
// intercommunicator) is known to have exited, and nil otherwise. Only
// processes on this node are known: a rank elsewhere is never reported.
// It reads /proc, so a layer that waits for a rank in its own loop calls
// it now and then, not on every poll (the blocking calls of this package
// check by themselves).
func (c *Comm) CheckPeer(rank int) error {
	if err := c.checkPeer(rank, false); err != nil {
		return err
	}
	if rank >= len(c.world) {
		return nil
	}
	if err := c.w.watch.Check(int(c.world[rank])); err != nil {
		return fmt.Errorf("endpoint: rank %d: %w", rank, err)
	}
	return nil
}

// Isend starts sending buf to rank dest with tag. buf must not be modified
// until the request completes. Messages up to the provider's inject size
// are normally copied out at once (the request is already complete); larger ones up
// to the eager limit are sent from the pinned buffer; larger still are
// announced, and the receiver reads them straight from buf (rendezvous), so
// the request completes only once the receiver has matched and read it.
// Towards a peer on the node transport (Comm.Transport) every message up
// to the eager limit is copied out at once. Isend does not wait for the receiver: a message the provider cannot take
// now (full queue, connection not yet accepted) is queued in the request,
// copied if it is inject-sized, and posted by later progress on this
// endpoint (Wait, Test, WaitAll, any call that drives it); messages from
// one endpoint go out in the order of their Isend calls.
func (c *Comm) Isend(buf []byte, dest, tag int) (*Request, error) {
	return c.startSend(buf, dest, tag, false)
}

// startSend is Isend; blocking tells that the caller waits for the send
// at once (Send).
func (c *Comm) startSend(buf []byte, dest, tag int, blocking bool) (*Request, error) {
	if err := c.usable("send"); err != nil {
		return nil, err
	}
	if dest == ProcNull {
		return completedRequest, nil
	}
	return c.isendMode(buf, dest, tag, c.ctx, 0, blocking)
}

func (c *Comm) isend(buf []byte, dest, tag int, ctx uint16) (*Request, error) {
	return c.isendSig(buf, dest, tag, ctx, 0)
}

// isendSig is isend for a message whose type signature hashes to sig (0:
// untyped), which a rendezvous header to a libfabric peer carries.
func (c *Comm) isendSig(buf []byte, dest, tag int, ctx uint16, sig uint64) (*Request, error) {
	return c.isendMode(buf, dest, tag, ctx, sig, false)
}

// isendMode is isendSig; blocking tells that the caller waits for the
// send at once (Send), so that the node transport may take a protocol
// that needs the sender's progress to complete (nodecopy.go).
func (c *Comm) isendMode(buf []byte, dest, tag int, ctx uint16, sig uint64, blocking bool) (*Request, error) {
	return c.isendSync(buf, dest, tag, ctx, sig, blocking, false)
}

// isendSync is isendMode; with sync the send completes only once a
// receive has matched it (Issend): every size goes by the rendezvous of
// the peer's transport, whose FIN the receiver sends once it has.
func (c *Comm) isendSync(buf []byte, dest, tag int, ctx uint16, sig uint64, blocking, sync bool) (*Request, error) {
	if err := c.checkPeer(dest, false); err != nil {
		return nil, err
	}
	if err := checkTag(tag, false); err != nil {
		return nil, err
	}
	v := c.v
	v.lock()
	defer v.unlock()
	if _, err := v.beginSend(); err != nil {
		return nil, err
	}
	if ctx == c.ctx { // the user's messages (and those of layers above), not endpoint's own
		c.count(dest, len(buf))
	}
	t := packTag(ctx, c.slots[dest], c.rank, tag)
	if l := c.link(dest); l != nil {
		if sync {
			if l.broken != nil {
				return nil, fmt.Errorf("endpoint: synchronous send of %d bytes to rank %d: %w", len(buf), dest, l.broken)
			}
			return v.nodeRdv(c, l, buf, t, dest, false, 0, sig)
		}
		return v.nodeSendStaged(c, l, buf, t, dest, false, sig, blocking)
	}
	addr := c.addrs[dest]
	if len(buf) <= v.injectLimit && !sync {
		if len(v.sendq) == 0 {
			var err error
			if v.hdr {
				err = v.injectHdr(buf, t, addr)
			} else { // the common case, without a call in between
				err = v.ep.InjectData(buf, t, addr)
			}
			if err != nil && errors.Is(err, fabric.ErrAgain) {
				err = v.tryPost(func() error { return v.injectData(buf, t, addr) })
			}
			if err == nil {
				return completedRequest, nil
			}
			if !errors.Is(err, fabric.ErrAgain) {
				return nil, fmt.Errorf("endpoint: send %d bytes to rank %d: %w", len(buf), dest, err)
			}
		}
		// The provider cannot take it now (full queue, or on shm a
		// connection the receiver has not accepted yet): queue a copy, as an
		// inject would have copied it; progress posts it.
		q := make([]byte, v.hdrLen()+len(buf))
		copy(q[v.hdrLen():], buf)
		r := &Request{v: v, c: c, kind: kSendEager, state: stPosted, buf: buf, qrank: dest,
			reqExt: &reqExt{qinject: true, qdata: q, qtag: t, qdest: addr}}
		v.enqueue(r)
		return r, nil
	}
	r := v.newSend(c, 0, buf, dest) // (its kind is set below)
	x := r.ext()
	x.qtag, x.qdest = t, addr
	if len(buf) <= v.fabEagerLimit() && !sync {
		r.kind = kSendEager
		if v.hdr {
			// The header goes in front of the data: copied into a registered
			// segment buffer or a reused staging buffer (stageEager).
			b, desc, seg, mr, err := v.stageEager(buf)
			if err != nil {
				return nil, err
			}
			r.qdata, r.qdesc, r.segIdx, r.mr = b, desc, seg, mr
			if seg == 0 {
				r.staged, r.buf = true, b
				r.pinBuf(b)
			}
		} else {
			if v.mrLocal {
				mr, err := v.regKeep(x, buf, fabric.AccessSend)
				if err != nil {
					return nil, fmt.Errorf("endpoint: register send buffer: %w", err)
				}
				r.qdesc = mr.Desc()
			}
			r.pinBuf(buf)
			r.qdata = buf
		}
		if err := v.submit(r); err != nil {
			r.unpinAll()
			v.freeSlot(r)
			v.releaseStaging(r)
			return nil, fmt.Errorf("endpoint: send %d bytes to rank %d: %w", len(buf), dest, err)
		}
		return r, nil
	}
	return v.fabRdv(r, x, buf, dest, sig)
}

// syncEmpty is registered in place of the data of an empty synchronous
// send to a libfabric peer (registration needs a byte; the header
// announces none).
var syncEmpty [1]byte

// fabRdv sends buf to a libfabric peer by rendezvous on r, a send
// request whose extension x holds the tag and address: buf is
// registered for remote read and announced; the receiver's FIN, once it
// has matched the message and read it, completes r. Caller holds the lock.
func (v *vci) fabRdv(r *Request, x *reqExt, buf []byte, dest int, sig uint64) (*Request, error) {
	t := x.qtag
	r.kind = kSendRdv
	// (Its handle is one the extension kept, if any: no allocation.)
	reg := buf
	if len(buf) == 0 { // an empty synchronous send: registration needs a byte
		reg = syncEmpty[:]
	}
	mr, err := v.regKeep(x, reg, fabric.AccessRemoteRead|fabric.AccessSend)
	if err != nil {
		return nil, fmt.Errorf("endpoint: register %d-byte rendezvous buffer: %w", len(buf), err)
	}
	v.seq++
	r.seq = v.seq
	r.qtag = t | rtsBit
	hsize := rdvHeaderSize
	if sig != 0 {
		hsize = rdvExtSize
	}
	h := rdvHeader{addr: mr.RemoteAddr(reg), key: mr.Key(), size: uint64(len(buf)), seq: r.seq}
	// Behind the reserved match header, if any: injected, or sent from
	// memory.
	if r.fhdr == nil {
		r.fhdr = make([]byte, matchHdrSize+rdvExtSize)
	}
	r.qdata = r.fhdr[:v.hdrLen()+hsize]
	h.put(r.qdata[v.hdrLen():])
	if sig != 0 {
		putExt(r.qdata[v.hdrLen():], modePlain, sig)
	}
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
		return nil, fmt.Errorf("endpoint: rendezvous header to rank %d: %w", dest, err)
	}
	return r, nil
}

// beginSend prepares a send on v, locked by the caller: it fails on a
// closed endpoint and first posts what progress left queued, since
// nothing may overtake a queued send (MPI order); queued reports whether
// some sends are still waiting (a new one must then be queued after them).
func (v *vci) beginSend() (queued bool, err error) {
	if v.isClosed() {
		return false, fmt.Errorf("endpoint: send: %w", ErrClosed)
	}
	if len(v.sendq) > 0 {
		v.flushSends()
	}
	return len(v.sendq) > 0, nil
}

// Irecv starts receiving into buf a message from rank src (or AnySource) with
// tag (or AnyTag). buf must not be touched until the request completes. A
// longer message completes the request with ErrTruncated (its first len(buf)
// bytes are delivered).
func (c *Comm) Irecv(buf []byte, src, tag int) (*Request, error) {
	if err := c.usable("receive"); err != nil {
		return nil, err
	}
	if src == ProcNull {
		return procNullRecv(), nil
	}
	return c.irecv(buf, src, tag, c.ctx)
}

func (c *Comm) irecv(buf []byte, src, tag int, ctx uint16) (*Request, error) {
	return c.irecvReq(buf, src, tag, ctx, false, nil)
}

// irecvReq posts a receive; with scratch it reuses c.scratch when free
// (blocking Recv: the request never escapes to the caller). With u the
// receive unpacks into u's typed layout as the data arrives (buf nil).
func (c *Comm) irecvReq(buf []byte, src, tag int, ctx uint16, scratch bool, u *typedRecv) (*Request, error) {
	return c.recvReq(buf, src, tag, ctx, scratch, u, nil)
}

// recvReq is irecvReq; with m it receives that message, taken from the
// unexpected queue by a matched probe (mprobe.go), instead of matching.
func (c *Comm) recvReq(buf []byte, src, tag int, ctx uint16, scratch bool, u *typedRecv, m *unexp) (*Request, error) {
	if err := c.checkPeer(src, true); err != nil {
		return nil, err
	}
	if err := checkTag(tag, true); err != nil {
		return nil, err
	}
	v := c.v
	v.lock()
	defer v.unlock()
	if v.isClosed() {
		return nil, fmt.Errorf("endpoint: receive: %w", ErrClosed)
	}
	if u != nil && u.dev != nil && !v.watchDevice(u.dev.Buf.Device()) { // ended by the device's close (gputyped.go)
		return nil, fmt.Errorf("endpoint: receive into %s: %w", u.dev.Buf.Device(), gpu.ErrClosed)
	}
	want, ignore := matchBits(ctx, c.mySlot, src, tag)
	var r *Request
	if scratch && c.scratch != nil {
		r, c.scratch = c.scratch, nil
		r.postRecv(v, c, buf, want, ignore, src)
	} else if r = v.takeFree(); r != nil {
		r.postRecv(v, c, buf, want, ignore, src)
	} else {
		r = &Request{v: v, c: c, kind: kRecv, state: stPosted, buf: buf, want: want, ignore: ignore, qrank: src}
	}
	if u != nil {
		// A copy: the caller's u may live on its stack.
		x := r.ext()
		x.layout = *u
		if u.sigOnly {
			x.sigLayout = &x.layout
		} else {
			x.typed = &x.layout
		}
	}
	if m != nil { // matched already
		v.take(r, *m)
		return r, nil
	}
	if len(v.unexpected) == 0 { // the message-rate case: nothing waiting
		v.posted.push(r)
		return r, nil
	}
	if m, ok := v.takeUnexpected(want, ignore); ok {
		v.take(r, m)
		return r, nil
	}
	v.posted.push(r)
	return r, nil
}

// take completes (or starts the rendezvous of) receive r with m, an
// unexpected message taken from the queue. Caller holds the lock.
func (v *vci) take(r *Request, m unexp) {
	if err := checkSigWord(r, m.sig, uint64(len(m.data))); err != nil {
		r.st = Status{Source: tagSource(m.tag), Tag: tagUser(m.tag)}
		v.finish(r, err)
		v.recycle(m.data)
		return
	}
	v.deliver(r, m.tag, m.data)
	v.recycle(m.data) // deliver copied or parsed it
}

// postRecv makes r, a reused request, a fresh posted receive. It wipes r
// in place and then sets the fields one by one: assigning a whole Request
// literal builds it on the stack and copies it over, which costs more
// than the rest of a small receive's bookkeeping.
func (r *Request) postRecv(v *vci, c *Comm, buf []byte, want, ignore uint64, src int) {
	r.wipe()
	r.v, r.c = v, c
	r.kind, r.state = kRecv, stPosted
	r.buf = buf
	r.want, r.ignore = want, ignore
	r.qrank = src
}

// Send sends buf to rank dest and returns once buf may be reused (for a
// rendezvous message: once the receiver has read it) or ctx ends.
func (c *Comm) Send(ctx context.Context, buf []byte, dest, tag int) error {
	r, err := c.startSend(buf, dest, tag, true)
	if err != nil {
		return err
	}
	_, err = r.Wait(ctx)
	r.recycle()
	return err
}

// Recv receives into buf a message from src (or AnySource) with tag (or
// AnyTag). If ctx ends first the receive is cancelled and the error wraps
// ctx.Err().
func (c *Comm) Recv(ctx context.Context, buf []byte, src, tag int) (Status, error) {
	if err := c.usable("receive"); err != nil {
		return Status{}, err
	}
	if src == ProcNull {
		return procNullRecv().st, nil
	}
	r, err := c.irecvReq(buf, src, tag, c.ctx, true, nil)
	if err != nil {
		return Status{}, err
	}
	st, err := waitOrCancel(ctx, r)
	// Keep the request for the next Recv unless it is still in flight
	// (abandoned after a cancelled wait): no allocation per message.
	v := r.v
	v.lock()
	if r.done {
		r.buf = nil
		c.scratch = r
	}
	v.unlock()
	return st, err
}

func waitOrCancel(ctx context.Context, r *Request) (Status, error) {
	st, err := r.Wait(ctx)
	if err != nil && (ctx.Err() != nil || errors.Is(err, ErrPeerGone)) && !r.Done() {
		_ = r.Cancel()
		if !r.Done() { // matched while we gave up: a rendezvous read is in flight
			if _, werr := r.waitTimeout(r.v.timeout); werr != nil {
				r.v.log.Warn("receive still in flight after cancel", "err", werr)
			}
		}
	}
	return st, err
}

// Iprobe drives progress once and reports whether a message from src (or
// AnySource) with tag (or AnyTag) can be received now, with its status
// (Count is the message's full length). The message stays queued for the
// next matching receive.
func (c *Comm) Iprobe(src, tag int) (bool, Status, error) {
	if src == ProcNull {
		if err := c.usable("probe"); err != nil {
			return false, Status{}, err
		}
		return true, procNullRecv().st, nil
	}
	if err := c.checkPeer(src, true); err != nil {
		return false, Status{}, err
	}
	if err := checkTag(tag, true); err != nil {
		return false, Status{}, err
	}
	v := c.v
	v.lock()
	defer v.unlock()
	if err := v.progress(); err != nil {
		return false, Status{}, err
	}
	want, ignore := matchBits(c.ctx, c.mySlot, src, tag)
	if u, ok := v.peekUnexpected(want, ignore); ok {
		return true, statusOf(u), nil
	}
	return false, Status{}, nil
}

// Probe waits until a message from src (or AnySource) with tag (or AnyTag)
// can be received and returns its status, leaving it queued.
func (c *Comm) Probe(ctx context.Context, src, tag int) (Status, error) {
	var st Status
	err := c.probeWait(ctx, "probe", src, func() (ok bool, err error) {
		ok, st, err = c.Iprobe(src, tag)
		return ok, err
	})
	return st, err
}

// probeWait calls try, a probe of src's messages, until it finds one or
// fails, pacing itself as a wait does; it gives up when ctx ends or, for
// a named src, when that rank's process has exited with nothing more
// for it (what src sent before it went is still found).
func (c *Comm) probeWait(ctx context.Context, what string, src int, try func() (bool, error)) error {
	done := ctx.Done()
	var pace peerwatch.Pacer
	for spins := 1; ; spins++ {
		ok, err := try()
		if err != nil || ok {
			return err
		}
		if spins%spinYield == 0 {
			if done != nil {
				select {
				case <-done:
					return fmt.Errorf("endpoint: %s: %w", what, ctx.Err())
				default:
				}
			}
			if spins >= spinFree && src != AnySource && pace.Due() {
				if err := c.w.watch.Check(int(c.world[src])); err != nil {
					if ok, perr := try(); perr != nil || ok {
						return perr
					}
					return fmt.Errorf("endpoint: %s from rank %d: %w", what, src, err)
				}
			}
			idle(spins, c.v.crowded, c.v.solo)
		} else if c.v.crowded {
			idle(spins, true, c.v.solo)
		}
	}
}

// Scalar is the set of element types the typed send and receive functions
// accept: fixed-size numbers without pointers.
type Scalar interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// AsBytes views a typed slice as its bytes (no copy).
func AsBytes[T Scalar](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// SendSlice sends a typed slice (see Comm.Send).
func SendSlice[T Scalar](ctx context.Context, c *Comm, s []T, dest, tag int) error {
	return c.Send(ctx, AsBytes(s), dest, tag)
}

// RecvSlice receives into a typed slice (see Comm.Recv); Status.Count is in bytes.
func RecvSlice[T Scalar](ctx context.Context, c *Comm, s []T, src, tag int) (Status, error) {
	return c.Recv(ctx, AsBytes(s), src, tag)
}

// IsendSlice starts sending a typed slice (see Comm.Isend).
func IsendSlice[T Scalar](c *Comm, s []T, dest, tag int) (*Request, error) {
	return c.Isend(AsBytes(s), dest, tag)
}

// IrecvSlice starts receiving into a typed slice (see Comm.Irecv).
func IrecvSlice[T Scalar](c *Comm, s []T, src, tag int) (*Request, error) {
	return c.Irecv(AsBytes(s), src, tag)
}
