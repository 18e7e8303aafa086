package endpoint

import (
	"context"
	"fmt"

	"github.com/weft-hpc/weft/ddt"
)

// Message is a message taken off its communicator's queue by a matched
// probe (Mprobe, Improbe: MPI_Mprobe, MPI_Improbe): no receive matches it
// any more, and Mrecv, Imrecv or their typed forms receive it (MPI_Mrecv).
// Where several goroutines receive on one communicator (a shared
// endpoint), a Probe followed by a Recv may receive another goroutine's
// message; a matched probe and its receive never do. A Message is
// received once; one from ProcNull (MPI_MESSAGE_NO_PROC) receives nothing.
type Message struct {
	c    *Comm
	m    unexp
	st   Status
	null bool // from ProcNull
	used bool
}

// Status describes the message: its source, tag and length in bytes
// (Count).
func (m *Message) Status() Status {
	if m == nil {
		return Status{}
	}
	return m.st
}

// Improbe drives progress once and, when a message from src (or
// AnySource) with tag (or AnyTag) has arrived, takes it off the queue and
// returns it (ok true). src may be ProcNull: a Message that receives
// nothing, at once.
func (c *Comm) Improbe(src, tag int) (msg *Message, ok bool, err error) {
	var ms [1]Message
	if n, err := c.ImprobeBatch(src, tag, ms[:]); n == 0 {
		return nil, false, err
	}
	m := ms[0]
	return &m, true, nil
}

// ImprobeBatch drives progress once and takes off the queue up to
// len(ms) messages from src (or AnySource) with tag (or AnyTag), in the
// order successive Improbe calls would take them, into ms; it returns how
// many it took. Each is then received as a Message Improbe returned is
// (Mrecv, Imrecv, or their typed forms). It allocates nothing, so a loop
// that handles a stream of small messages (active messages) reuses ms.
// src ProcNull takes one message that receives nothing.
func (c *Comm) ImprobeBatch(src, tag int, ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	if src == ProcNull {
		if err := c.usable("matched probe"); err != nil {
			return 0, err
		}
		ms[0] = Message{c: c, st: procNullRecv().st, null: true}
		return 1, nil
	}
	if err := c.checkPeer(src, true); err != nil {
		return 0, err
	}
	if err := checkTag(tag, true); err != nil {
		return 0, err
	}
	v := c.v
	v.lock()
	defer v.unlock()
	if err := v.progress(); err != nil {
		return 0, err
	}
	want, ignore := matchBits(c.ctx, c.mySlot, src, tag)
	n := 0
	for n < len(ms) {
		u, ok := v.takeUnexpected(want, ignore)
		if !ok {
			break
		}
		ms[n] = Message{c: c, m: u, st: statusOf(u)}
		n++
	}
	return n, nil
}

// Mprobe waits until a message from src (or AnySource) with tag (or
// AnyTag) has arrived and takes it off the queue (see Improbe). It fails
// when ctx ends or, for a named src, when that rank's process has exited
// with nothing more for it.
func (c *Comm) Mprobe(ctx context.Context, src, tag int) (*Message, error) {
	var m *Message
	err := c.probeWait(ctx, "matched probe", src, func() (ok bool, err error) {
		m, ok, err = c.Improbe(src, tag)
		return ok, err
	})
	return m, err
}

// receive receives the message by post, which starts a receive of it;
// a message with nothing wrong with it is received once, and one whose
// receive could not start (a bad layout) stays to receive.
func (m *Message) receive(post func() (*Request, error)) (*Request, error) {
	const op = "matched receive"
	if m == nil || m.c == nil {
		return nil, fmt.Errorf("endpoint: %s of a nil message: %w", op, ErrInvalid)
	}
	if m.used {
		return nil, fmt.Errorf("endpoint: %s: the message was received already: %w", op, ErrInvalid)
	}
	if err := m.c.usable(op); err != nil {
		return nil, err
	}
	if m.null {
		m.used = true
		return procNullRecv(), nil
	}
	r, err := post()
	if err == nil {
		m.used, m.m = true, unexp{} // its payload buffer is the endpoint's again
	}
	return r, err
}

// Imrecv starts receiving the message into buf (MPI_Imrecv); a longer
// message completes the request with ErrTruncated, as Irecv's does.
func (m *Message) Imrecv(buf []byte) (*Request, error) {
	return m.receive(func() (*Request, error) {
		return m.c.recvReq(buf, m.st.Source, m.st.Tag, m.c.ctx, false, nil, &m.m)
	})
}

// Mrecv receives the message into buf (MPI_Mrecv) and returns its status.
// If ctx ends first the error wraps ctx.Err(); the message is then lost
// (it was matched), as MPI's is.
func (m *Message) Mrecv(ctx context.Context, buf []byte) (Status, error) {
	if st, ok, err := m.recvEager(buf); ok {
		return st, err
	}
	r, err := m.Imrecv(buf)
	return recvWait(ctx, r, err)
}

// recvEager receives a message that arrived whole (not a rendezvous
// header) with no request: it copies the payload and hands its buffer
// back to the endpoint, as a receive completed at once would (ok false:
// take the general path).
func (m *Message) recvEager(buf []byte) (st Status, ok bool, err error) {
	if m == nil || m.c == nil || m.used || m.null || tagIsRTS(m.m.tag) || m.c.usable("matched receive") != nil {
		return Status{}, false, nil
	}
	data := m.m.data
	st = Status{Source: m.st.Source, Tag: m.st.Tag, Count: copy(buf, data)}
	if len(data) > len(buf) {
		err = fmt.Errorf("endpoint: message of %d bytes from rank %d into %d: %w", len(data), st.Source, len(buf), ErrTruncated)
	}
	v := m.c.v
	v.lock()
	v.recycle(data)
	v.unlock()
	m.used, m.m = true, unexp{}
	return st, true, err
}

// ImrecvTyped starts receiving the message into count elements of t laid
// out in buf (as IrecvTyped receives); a bad layout is an error that
// leaves the message to receive.
func (m *Message) ImrecvTyped(buf []byte, count int, t *ddt.Type) (*Request, error) {
	return m.receive(func() (*Request, error) {
		return m.c.irecvTyped(buf, count, t, m.st.Source, m.st.Tag, &m.m)
	})
}

// MrecvTyped receives the message into count elements of t laid out in
// buf (see ImrecvTyped and Mrecv).
func (m *Message) MrecvTyped(ctx context.Context, buf []byte, count int, t *ddt.Type) (Status, error) {
	r, err := m.ImrecvTyped(buf, count, t)
	return recvWait(ctx, r, err)
}
