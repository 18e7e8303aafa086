package endpoint

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/weft-hpc/weft/fabric"
)

func (c *Comm) checkPeer(rank int, wildcardOK bool) error {
	if c.freed {
		return fmt.Errorf("endpoint: %w", ErrFreed)
	}
	if rank == AnySource && wildcardOK {
		return nil
	}
	if rank < 0 || rank >= c.size {
		return fmt.Errorf("endpoint: rank %d outside 0..%d: %w", rank, c.size-1, ErrInvalid)
	}
	return nil
}

// Isend starts sending buf to rank dest with tag. buf must not be modified
// until the request completes. Messages up to the eager limit are copied by
// the provider (inject: the request is complete on return) or sent from the
// pinned buffer; larger ones are announced, and the receiver reads them from
// buf (rendezvous), so the request completes only once the receiver has
// posted a matching receive and read the data.
func (c *Comm) Isend(buf []byte, dest, tag int) (*Request, error) {
	return c.isend(buf, dest, tag, c.ctx)
}

func (c *Comm) isend(buf []byte, dest, tag int, ctx uint16) (*Request, error) {
	if err := c.checkPeer(dest, false); err != nil {
		return nil, err
	}
	if err := checkTag(tag, false); err != nil {
		return nil, err
	}
	v := c.v
	v.lock()
	defer v.unlock()
	t := packTag(ctx, c.slots[dest], c.rank, tag)
	addr := c.addrs[dest]
	if len(buf) <= v.injectLimit {
		if err := v.again("inject", func() error { return v.ep.TInject(buf, addr, t) }); err != nil {
			return nil, fmt.Errorf("endpoint: send %d bytes to rank %d: %w", len(buf), dest, err)
		}
		return completedRequest, nil
	}
	r := &Request{v: v, c: c, state: stPosted}
	if len(buf) <= v.eagerLimit {
		r.kind = kSendEager
		r.buf = buf
		var desc fabric.Desc
		if v.mrLocal {
			mr, err := v.dom.Register(buf, fabric.AccessSend)
			if err != nil {
				return nil, fmt.Errorf("endpoint: register send buffer: %w", err)
			}
			r.mr, desc = mr, mr.Desc()
		}
		r.pinBuf(buf)
		h := v.handle(r)
		if err := v.again("send", func() error { return v.ep.TSend(buf, desc, addr, t, h) }); err != nil {
			r.unpinAll()
			v.freeSlot(r)
			return nil, fmt.Errorf("endpoint: send %d bytes to rank %d: %w", len(buf), dest, err)
		}
		r.pending++
		return r, nil
	}
	// Rendezvous: register buf for remote read, post the FIN receive, send the header.
	r.kind = kSendRdv
	r.buf = buf
	mr, err := v.dom.Register(buf, fabric.AccessRemoteRead|fabric.AccessSend)
	if err != nil {
		return nil, fmt.Errorf("endpoint: register %d-byte rendezvous buffer: %w", len(buf), err)
	}
	r.mr = mr
	v.seq++
	r.seq = v.seq
	r.pin.Pin(&r.fin[0])
	r.pinned = true
	h := v.handle(r)
	fin := r.fin[:]
	if err := v.again("post FIN receive", func() error {
		return v.ep.TRecv(fin, 0, addr, ctrlTag(r.seq), 0, h|roleBit)
	}); err != nil {
		r.unpinAll()
		v.freeSlot(r)
		return nil, fmt.Errorf("endpoint: rendezvous to rank %d: %w", dest, err)
	}
	r.pending++
	var hdr [rdvHeaderSize]byte
	rdvHeader{addr: mr.RemoteAddr(buf), key: mr.Key(), size: uint64(len(buf)), seq: r.seq}.put(hdr[:])
	if rdvHeaderSize <= v.info.InjectSize {
		err = v.again("inject header", func() error { return v.ep.TInject(hdr[:], addr, t|rtsBit) })
	} else {
		hb := make([]byte, rdvHeaderSize)
		copy(hb, hdr[:])
		r.scratch = hb
		r.pin.Pin(&hb[0])
		err = v.again("send header", func() error { return v.ep.TSend(hb, 0, addr, t|rtsBit, h) })
		if err == nil {
			r.pending++
		}
	}
	if err != nil {
		_ = v.ep.Cancel(h | roleBit)
		v.finish(r, err)
		return nil, fmt.Errorf("endpoint: rendezvous header to rank %d: %w", dest, err)
	}
	return r, nil
}

// Irecv starts receiving into buf a message from rank src (or AnySource) with
// tag (or AnyTag). buf must not be touched until the request completes. A
// longer message completes the request with ErrTruncated (its first len(buf)
// bytes are delivered).
func (c *Comm) Irecv(buf []byte, src, tag int) (*Request, error) {
	return c.irecv(buf, src, tag, c.ctx)
}

func (c *Comm) irecv(buf []byte, src, tag int, ctx uint16) (*Request, error) {
	if err := c.checkPeer(src, true); err != nil {
		return nil, err
	}
	if err := checkTag(tag, true); err != nil {
		return nil, err
	}
	v := c.v
	v.lock()
	defer v.unlock()
	want, ignore := matchBits(ctx, c.mySlot, src, tag)
	r := &Request{v: v, c: c, kind: kRecv, state: stPosted, buf: buf, want: want, ignore: ignore}
	if len(v.stash) > 0 {
		for i, s := range v.stash {
			if tagMatches(s.tag, want, ignore) {
				v.stash = append(v.stash[:i], v.stash[i+1:]...)
				v.fromStash(r, s)
				return r, nil
			}
		}
	}
	target := buf
	if len(buf) < rdvHeaderSize {
		// room for a rendezvous header: receive small messages into scratch.
		r.scratch = make([]byte, rdvHeaderSize)
		target = r.scratch
	}
	var desc fabric.Desc
	if v.mrLocal && len(target) > 0 {
		mr, err := v.dom.Register(target, fabric.AccessRecv)
		if err != nil {
			return nil, fmt.Errorf("endpoint: register receive buffer: %w", err)
		}
		r.mr, desc = mr, mr.Desc()
	}
	r.pinBuf(target)
	h := v.handle(r)
	if err := v.again("post receive", func() error {
		return v.ep.TRecv(target, desc, fabric.AddrUnspec, want, ignore, h)
	}); err != nil {
		r.unpinAll()
		v.freeSlot(r)
		return nil, fmt.Errorf("endpoint: receive from rank %d: %w", src, err)
	}
	r.pending++
	return r, nil
}

// fromStash completes (or starts the rendezvous of) r from a probed message.
func (v *vci) fromStash(r *Request, s stashed) {
	if tagIsRTS(s.tag) {
		r.pinBuf(r.buf)
		v.startRead(r, s.tag, parseHeader(s.data))
		return
	}
	r.st = Status{Source: tagSource(s.tag), Tag: tagUser(s.tag), Count: copy(r.buf, s.data)}
	var err error
	if len(s.data) > len(r.buf) {
		err = fmt.Errorf("endpoint: receive of %d bytes into %d: %w", len(s.data), len(r.buf), ErrTruncated)
	}
	v.finish(r, err)
}

// Send sends buf to rank dest and returns once buf may be reused (for a
// rendezvous message: once the receiver has read it) or ctx ends.
func (c *Comm) Send(ctx context.Context, buf []byte, dest, tag int) error {
	r, err := c.Isend(buf, dest, tag)
	if err != nil {
		return err
	}
	_, err = r.Wait(ctx)
	return err
}

// Recv receives into buf a message from src (or AnySource) with tag (or
// AnyTag). If ctx ends first the receive is cancelled and the error wraps
// ctx.Err().
func (c *Comm) Recv(ctx context.Context, buf []byte, src, tag int) (Status, error) {
	r, err := c.Irecv(buf, src, tag)
	if err != nil {
		return Status{}, err
	}
	return waitOrCancel(ctx, r)
}

func waitOrCancel(ctx context.Context, r *Request) (Status, error) {
	st, err := r.Wait(ctx)
	if err != nil && ctx.Err() != nil && !r.Done() {
		_ = r.Cancel()
		if _, werr := r.waitTimeout(r.v.timeout); werr != nil && !errors.Is(werr, ErrCanceled) {
			r.v.log.Warn("receive still in flight after cancel", "err", werr)
		}
	}
	return st, err
}

// Iprobe reports whether a message from src (or AnySource) with tag (or
// AnyTag) can be received now, and its status (Count is the message's full
// length). The message stays queued for the next matching receive.
func (c *Comm) Iprobe(src, tag int) (bool, Status, error) {
	r, ok, st, err := c.startProbe(src, tag)
	if err != nil || ok {
		return ok, st, err
	}
	v := c.v
	v.lock()
	if err := v.progress(); err != nil {
		v.unlock()
		return false, Status{}, err
	}
	if !r.done && r.state == stPosted {
		_ = v.cancel(r)
	}
	v.unlock()
	st, err = r.waitTimeout(v.timeout)
	if err != nil {
		return false, Status{}, err
	}
	if st.Canceled {
		return false, Status{}, nil
	}
	return true, st, nil
}

// Probe waits until a message from src (or AnySource) with tag (or AnyTag)
// can be received and returns its status, leaving it queued.
func (c *Comm) Probe(ctx context.Context, src, tag int) (Status, error) {
	r, ok, st, err := c.startProbe(src, tag)
	if err != nil || ok {
		return st, err
	}
	st, err = waitOrCancel(ctx, r)
	if err == nil && st.Canceled {
		return Status{}, fmt.Errorf("endpoint: probe: %w", ErrCanceled)
	}
	return st, err
}

// startProbe answers from the stash, or posts an internal receive into a
// bounce buffer whose completion moves the message into the stash.
func (c *Comm) startProbe(src, tag int) (*Request, bool, Status, error) {
	if err := c.checkPeer(src, true); err != nil {
		return nil, false, Status{}, err
	}
	if err := checkTag(tag, true); err != nil {
		return nil, false, Status{}, err
	}
	v := c.v
	v.lock()
	defer v.unlock()
	want, ignore := matchBits(c.ctx, c.mySlot, src, tag)
	for _, s := range v.stash {
		if tagMatches(s.tag, want, ignore) {
			return nil, true, statusOf(s.tag, len(s.data), s.data), nil
		}
	}
	size := v.eagerLimit
	if size < rdvHeaderSize {
		size = rdvHeaderSize
	}
	r := &Request{v: v, c: c, kind: kProbe, state: stPosted, want: want, ignore: ignore}
	r.scratch = make([]byte, size)
	var desc fabric.Desc
	if v.mrLocal {
		mr, err := v.dom.Register(r.scratch, fabric.AccessRecv)
		if err != nil {
			return nil, false, Status{}, fmt.Errorf("endpoint: register probe buffer: %w", err)
		}
		r.mr, desc = mr, mr.Desc()
	}
	r.pinBuf(r.scratch)
	h := v.handle(r)
	if err := v.again("post probe", func() error {
		return v.ep.TRecv(r.scratch, desc, fabric.AddrUnspec, want, ignore, h)
	}); err != nil {
		r.unpinAll()
		v.freeSlot(r)
		return nil, false, Status{}, fmt.Errorf("endpoint: probe: %w", err)
	}
	r.pending++
	return r, false, Status{}, nil
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
