package endpoint

// The vci ("virtual communication interface", as MPICH calls it) is one
// libfabric endpoint with its CQ and AV, plus the state this package keeps
// beside libfabric's own tagged matching: the request table, the queue of
// probed-but-unreceived messages and the rendezvous sequence counter.
//
// Memory and pointer rules (cgo): libfabric never sees a Go pointer it keeps.
// Operation contexts are integer handles (index into v.slots, plus a role
// bit). Buffers handed to libfabric for the duration of an operation are Go
// memory pinned with the request's runtime.Pinner from posting until the
// completion has been read (or C/mmap memory, which Pin ignores); buffers a
// peer reads by rendezvous are registered (fabric.Domain.Register pins them)
// until the FIN arrives.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-hpc/weft/fabric"
)

const (
	roleMain = 0
	roleFin  = 1
	roleBit  = uint64(1) << 40
)

// FIN payload status codes (receiver → sender).
const (
	finOK        = 0
	finTruncated = 1
	finFailed    = 2
)

type stashed struct {
	tag  uint64
	data []byte // eager payload, or the rendezvous header
}

type deferredOp struct {
	r    *Request
	kind int // 0 = post read, 1 = send FIN
}

type vci struct {
	shared bool
	mu     sync.Mutex

	info   *fabric.Info
	fab    *fabric.Fabric // owned when non-nil
	dom    *fabric.Domain
	ownDom bool
	cq     *fabric.CQ
	av     *fabric.AV
	ep     *fabric.Endpoint

	mrLocal     bool
	injectLimit int
	eagerLimit  int
	timeout     time.Duration

	slots  []*Request
	free   []int32
	comps  [64]fabric.Completion
	seq    uint64
	stash  []stashed
	defer_ []deferredOp

	refs   int
	closed bool
	log    hclog.Logger
	name   []byte
}

func (v *vci) lock() {
	if v.shared {
		v.mu.Lock()
	}
}

func (v *vci) unlock() {
	if v.shared {
		v.mu.Unlock()
	}
}

// openVCI opens CQ, AV and endpoint in dom.
func openVCI(info *fabric.Info, dom *fabric.Domain, cfg *config, avCount int, shared bool, log hclog.Logger) (*vci, error) {
	v := &vci{
		shared:     shared,
		info:       info,
		dom:        dom,
		eagerLimit: cfg.eagerLimit,
		timeout:    cfg.timeout,
		log:        log,
		refs:       1,
	}
	v.mrLocal = info.MRMode&fabric.MRLocal != 0
	v.injectLimit = info.InjectSize
	if v.injectLimit > v.eagerLimit {
		v.injectLimit = v.eagerLimit
	}
	var err error
	if v.cq, err = dom.OpenCQ(cfg.cqSize); err != nil {
		return nil, fmt.Errorf("endpoint: open CQ: %w", err)
	}
	if v.av, err = dom.OpenAV(avCount); err != nil {
		v.cq.Close()
		return nil, fmt.Errorf("endpoint: open AV: %w", err)
	}
	if v.ep, err = dom.OpenEndpoint(info, v.cq, v.av); err != nil {
		v.av.Close()
		v.cq.Close()
		return nil, fmt.Errorf("endpoint: open endpoint: %w", err)
	}
	if v.name, err = v.ep.Name(); err != nil {
		v.closeFabric()
		return nil, fmt.Errorf("endpoint: endpoint name: %w", err)
	}
	return v, nil
}

func (v *vci) closeFabric() error {
	var errs []error
	if v.ep != nil {
		errs = append(errs, v.ep.Close())
	}
	if v.av != nil {
		errs = append(errs, v.av.Close())
	}
	if v.cq != nil {
		errs = append(errs, v.cq.Close())
	}
	if v.ownDom && v.dom != nil {
		errs = append(errs, v.dom.Close())
	}
	if v.fab != nil {
		errs = append(errs, v.fab.Close())
	}
	return errors.Join(errs...)
}

// release drops one reference; the last one closes the fabric objects.
// Requests still in flight are abandoned (their pins are released).
func (v *vci) release() error {
	v.lock()
	defer v.unlock()
	if v.closed {
		return nil
	}
	v.refs--
	if v.refs > 0 {
		return nil
	}
	v.closed = true
	err := v.closeFabric()
	for i, r := range v.slots {
		if r != nil {
			r.unpinAll()
			v.slots[i] = nil
		}
	}
	return err
}

func (v *vci) retain() {
	v.lock()
	v.refs++
	v.unlock()
}

// handle allocates a slot for r.
func (v *vci) handle(r *Request) uint64 {
	if r.slot == 0 {
		if n := len(v.free); n > 0 {
			r.slot = v.free[n-1]
			v.free = v.free[:n-1]
			v.slots[r.slot-1] = r
		} else {
			v.slots = append(v.slots, r)
			r.slot = int32(len(v.slots))
		}
	}
	return uint64(r.slot)
}

func (v *vci) freeSlot(r *Request) {
	if r.slot != 0 {
		v.slots[r.slot-1] = nil
		v.free = append(v.free, r.slot)
		r.slot = 0
	}
}

func (r *Request) pinBuf(b []byte) {
	if len(b) == 0 {
		return
	}
	r.pin.Pin(&b[0])
	r.pinned = true
}

func (r *Request) unpinAll() {
	if r.pinned {
		r.pin.Unpin()
		r.pinned = false
	}
	if r.mr != nil {
		r.mr.Close()
		r.mr = nil
	}
}

// finish marks r logically complete; it becomes done once no fabric op
// references it.
func (v *vci) finish(r *Request, err error) {
	if r.state == stDone {
		return
	}
	r.state = stDone
	r.err = err
	v.maybeRetire(r)
}

func (v *vci) maybeRetire(r *Request) {
	if r.state == stDone && r.pending == 0 && !r.finNeeded {
		r.unpinAll()
		v.freeSlot(r)
		r.done = true
	}
}

// again runs post until it stops returning ErrAgain, driving progress in
// between, for at most the endpoint timeout.
func (v *vci) again(what string, post func() error) error {
	var deadline time.Time
	for i := 0; ; i++ {
		err := post()
		if err == nil || !errors.Is(err, fabric.ErrAgain) {
			return err
		}
		if perr := v.poll(); perr != nil {
			return perr
		}
		if i&255 == 255 {
			if deadline.IsZero() {
				deadline = time.Now().Add(v.timeout)
			} else if time.Now().After(deadline) {
				return fmt.Errorf("endpoint: %s: queue stayed full for %v: %w", what, v.timeout, err)
			}
			runtime.Gosched()
		}
	}
}

// progress reads completions and runs deferred work. Caller holds the lock.
func (v *vci) progress() error {
	if v.closed {
		return fmt.Errorf("endpoint: progress: %w", ErrFreed)
	}
	if err := v.poll(); err != nil {
		return err
	}
	if len(v.defer_) > 0 {
		v.runDeferred()
	}
	return nil
}

func (v *vci) poll() error {
	for {
		n, err := v.cq.Read(v.comps[:])
		for i := 0; i < n; i++ {
			v.complete(&v.comps[i])
		}
		if err != nil {
			var ce *fabric.CQError
			if errors.As(err, &ce) {
				v.completeError(ce)
				continue
			}
			if errors.Is(err, fabric.ErrAgain) {
				return nil
			}
			return fmt.Errorf("endpoint: read CQ: %w", err)
		}
		if n < len(v.comps) {
			return nil
		}
	}
}

func (v *vci) lookup(ctx uint64) (*Request, int) {
	idx := int(ctx &^ roleBit)
	if idx <= 0 || idx > len(v.slots) {
		return nil, 0
	}
	role := roleMain
	if ctx&roleBit != 0 {
		role = roleFin
	}
	return v.slots[idx-1], role
}

func (v *vci) complete(c *fabric.Completion) {
	r, role := v.lookup(c.Context)
	if r == nil {
		v.log.Warn("completion for unknown context", "context", c.Context)
		return
	}
	r.pending--
	switch r.kind {
	case kSendEager:
		v.finish(r, nil)
	case kSendRdv:
		if role == roleFin {
			var err error
			switch binary.LittleEndian.Uint64(r.fin[:]) {
			case finOK:
			case finTruncated:
				// MPI reports truncation at the receiver only; the send succeeded.
			default:
				err = fmt.Errorf("endpoint: rendezvous send: receiver failed to read the data")
			}
			v.finish(r, err)
		} else {
			v.maybeRetire(r)
		}
	case kRecv, kProbe:
		switch r.state {
		case stPosted:
			v.matched(r, c.Tag, c.Len)
		case stReading:
			v.readDone(r, nil)
		default:
			v.maybeRetire(r)
		}
	}
}

func (v *vci) completeError(ce *fabric.CQError) {
	r, role := v.lookup(ce.Context)
	if r == nil {
		v.log.Warn("error completion for unknown context", "context", ce.Context, "err", ce.Err)
		return
	}
	r.pending--
	switch {
	case r.kind == kRecv && r.state == stPosted && errors.Is(ce.Err, fabric.ErrCanceled):
		r.st = Status{Source: AnySource, Tag: AnyTag, Canceled: true}
		v.finish(r, fmt.Errorf("endpoint: receive: %w", ErrCanceled))
	case r.kind == kProbe && r.state == stPosted && errors.Is(ce.Err, fabric.ErrCanceled):
		r.st = Status{Canceled: true}
		v.finish(r, nil)
	case (r.kind == kRecv || r.kind == kProbe) && r.state == stPosted && errors.Is(ce.Err, fabric.ErrTruncated):
		r.st = Status{Source: AnySource, Tag: AnyTag, Count: len(r.buf)}
		if r.kind == kRecv && r.scratch != nil {
			copy(r.buf, r.scratch)
		}
		if r.kind == kProbe {
			r.st.Count = ce.Olen
		}
		v.finish(r, fmt.Errorf("endpoint: receive of %d bytes into %d: %w", ce.Olen, len(r.buf), ErrTruncated))
	case r.state == stReading:
		v.readDone(r, ce)
	case r.kind == kSendRdv && role == roleMain:
		// the header send failed: the FIN will never come; cancel its receive.
		_ = v.ep.Cancel(uint64(r.slot) | roleBit)
		v.finish(r, fmt.Errorf("endpoint: rendezvous header: %w", ce))
	default:
		v.finish(r, fmt.Errorf("endpoint: %s: %w", r.describe(), ce))
	}
}

// matched handles a receive completion (eager data or rendezvous header).
func (v *vci) matched(r *Request, tag uint64, n int) {
	target := r.buf
	if r.scratch != nil {
		target = r.scratch
	}
	if r.kind == kProbe {
		data := append([]byte(nil), target[:n]...)
		v.stash = append(v.stash, stashed{tag: tag, data: data})
		r.st = statusOf(tag, n, data)
		v.finish(r, nil)
		return
	}
	if tagIsRTS(tag) {
		hdr := parseHeader(target[:n])
		v.startRead(r, tag, hdr)
		return
	}
	r.st = Status{Source: tagSource(tag), Tag: tagUser(tag), Count: n}
	var err error
	if r.scratch != nil {
		m := copy(r.buf, r.scratch[:n])
		r.st.Count = m
		if n > m {
			err = fmt.Errorf("endpoint: receive of %d bytes into %d: %w", n, len(r.buf), ErrTruncated)
		}
	}
	v.finish(r, err)
}

func statusOf(tag uint64, n int, data []byte) Status {
	st := Status{Source: tagSource(tag), Tag: tagUser(tag), Count: n}
	if tagIsRTS(tag) {
		st.Count = int(parseHeader(data).size)
	}
	return st
}

type rdvHeader struct {
	addr, key, size, seq uint64
}

func (h rdvHeader) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], h.addr)
	binary.LittleEndian.PutUint64(b[8:], h.key)
	binary.LittleEndian.PutUint64(b[16:], h.size)
	binary.LittleEndian.PutUint64(b[24:], h.seq)
}

func parseHeader(b []byte) rdvHeader {
	if len(b) < rdvHeaderSize {
		return rdvHeader{}
	}
	return rdvHeader{
		addr: binary.LittleEndian.Uint64(b[0:]),
		key:  binary.LittleEndian.Uint64(b[8:]),
		size: binary.LittleEndian.Uint64(b[16:]),
		seq:  binary.LittleEndian.Uint64(b[24:]),
	}
}

// startRead begins the rendezvous read for receive r.
func (v *vci) startRead(r *Request, tag uint64, h rdvHeader) {
	src := tagSource(tag)
	r.st = Status{Source: src, Tag: tagUser(tag)}
	n := len(r.buf)
	if uint64(n) > h.size {
		n = int(h.size)
	}
	r.st.Count = n
	r.finNeeded = true
	r.finSeq = h.seq
	if src < 0 || src >= len(r.c.addrs) {
		r.finNeeded = false
		v.finish(r, fmt.Errorf("endpoint: rendezvous from unknown rank %d", src))
		return
	}
	r.finDest = r.c.addrs[src]
	r.finStatus = finOK
	if uint64(len(r.buf)) < h.size {
		r.finStatus = finTruncated
	}
	r.state = stReading
	if n == 0 {
		v.readDone(r, nil)
		return
	}
	r.buf = r.buf[:n]
	r.mrAddr, r.mrKey = h.addr, h.key
	if err := v.postRead(r); err != nil {
		if errors.Is(err, fabric.ErrAgain) {
			v.defer_ = append(v.defer_, deferredOp{r: r, kind: 0})
			return
		}
		v.readDone(r, err)
	}
}

func (v *vci) postRead(r *Request) error {
	var desc fabric.Desc
	if v.mrLocal && r.mr == nil {
		mr, err := v.dom.Register(r.buf, fabric.AccessRead|fabric.AccessRecv)
		if err != nil {
			return err
		}
		r.mr = mr
	}
	if r.mr != nil {
		desc = r.mr.Desc()
	}
	if err := v.ep.Read(r.buf, desc, r.finDest, r.mrAddr, r.mrKey, v.handle(r)); err != nil {
		return err
	}
	r.pending++
	return nil
}

// readDone ends the receive side of a rendezvous: FIN to the sender, then
// completion of the user request.
func (v *vci) readDone(r *Request, err error) {
	r.state = stDone
	if err != nil {
		r.finStatus = finFailed
		r.err = fmt.Errorf("endpoint: rendezvous read from rank %d: %w", r.st.Source, err)
	} else if r.finStatus == finTruncated {
		r.err = fmt.Errorf("endpoint: rendezvous receive into %d bytes: %w", len(r.buf), ErrTruncated)
	}
	if ferr := v.sendFin(r); ferr != nil {
		if errors.Is(ferr, fabric.ErrAgain) {
			v.defer_ = append(v.defer_, deferredOp{r: r, kind: 1})
			return
		}
		r.finNeeded = false
		if r.err == nil {
			r.err = fmt.Errorf("endpoint: rendezvous FIN to rank %d: %w", r.st.Source, ferr)
		}
	}
	v.maybeRetire(r)
}

func (v *vci) sendFin(r *Request) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], r.finStatus)
	if err := v.ep.TInject(b[:], r.finDest, ctrlTag(r.finSeq)); err != nil {
		return err
	}
	r.finNeeded = false
	return nil
}

func (v *vci) runDeferred() {
	ops := v.defer_
	v.defer_ = nil
	for _, op := range ops {
		r := op.r
		var err error
		if op.kind == 0 {
			err = v.postRead(r)
		} else {
			err = v.sendFin(r)
		}
		if err != nil && errors.Is(err, fabric.ErrAgain) {
			v.defer_ = append(v.defer_, op)
			continue
		}
		if op.kind == 0 && err != nil {
			v.readDone(r, err)
			continue
		}
		if op.kind == 1 {
			if err != nil {
				r.finNeeded = false
				if r.err == nil {
					r.err = fmt.Errorf("endpoint: rendezvous FIN: %w", err)
				}
			}
			v.maybeRetire(r)
		}
	}
}

func (v *vci) cancel(r *Request) error {
	switch r.kind {
	case kSendEager, kSendRdv:
		return fmt.Errorf("endpoint: cancel of a send: %w", ErrNotSupported)
	}
	if r.state != stPosted || r.slot == 0 || r.cancelAsked {
		return nil
	}
	r.cancelAsked = true
	if err := v.ep.Cancel(uint64(r.slot)); err != nil && !errors.Is(err, fabric.ErrAgain) {
		// Already matched (ENOENT and friends): the request completes normally.
		v.log.Debug("cancel", "err", err)
	}
	return nil
}
