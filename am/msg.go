package am

import (
	"fmt"
	"slices"
)

// Msg is the active message a handler runs for. It and the slices it
// returns are valid until the handler returns.
type Msg struct {
	e       *Engine
	f       *frame
	src, id int
	token   uint32 // the caller's token; 0 for a message sent with Send
	header  []byte
	payload []byte // inline payload (nil while a following one is unread)
	plen    int
	follows bool // the payload follows on the data communicator
	taken   bool // ... and has been received
	replied bool
}

// Source is the rank that sent the message.
func (m *Msg) Source() int { return m.src }

// Handler is the id the message was sent to.
func (m *Msg) Handler() int { return m.id }

// Header is the message's header.
func (m *Msg) Header() []byte { return m.header }

// Len is the length of the message's payload in bytes.
func (m *Msg) Len() int { return m.plen }

// IsCall reports whether the sender waits for a reply (Call).
func (m *Msg) IsCall() bool { return m.token != 0 }

// Payload returns the message's payload; a payload that followed its
// header is received first into the engine's buffer.
func (m *Msg) Payload() ([]byte, error) {
	if !m.follows || m.taken {
		return m.payload, nil
	}
	f := m.f
	f.scrap = slices.Grow(f.scrap[:0], m.plen)
	if _, err := m.ReadPayload(f.scrap[:m.plen]); err != nil {
		return nil, err
	}
	m.payload = f.scrap[:m.plen]
	return m.payload, nil
}

// ReadPayload copies the message's payload into dst, receiving a payload
// that followed its header straight into dst; it returns the length. A
// dst shorter than Len is an error wrapping ErrTruncated that moves
// nothing.
func (m *Msg) ReadPayload(dst []byte) (int, error) {
	if len(dst) < m.plen {
		return 0, fmt.Errorf("am: payload of %d bytes into %d: %w", m.plen, len(dst), ErrTruncated)
	}
	if !m.follows || m.taken {
		return copy(dst, m.payload), nil
	}
	m.taken = true
	st, err := m.e.data.Recv(m.f.hctx.Context, dst[:m.plen], m.src, dataTag)
	if err != nil {
		return 0, fmt.Errorf("am: receive the payload from rank %d: %w", m.src, err)
	}
	if st.Count != m.plen {
		return st.Count, fmt.Errorf("am: payload from rank %d of %d bytes, announced %d: %w", m.src, st.Count, m.plen, ErrInvalid)
	}
	return m.plen, nil
}

// Reply answers a Call with b, which the caller receives as Call's
// result; it returns once b may be reused. A call is answered once: a
// handler that returns without replying answers with no bytes (or with
// its error). Replying to a message sent with Send, or twice, is an error
// wrapping ErrInvalid.
func (m *Msg) Reply(b []byte) error {
	if m.token == 0 {
		return fmt.Errorf("am: reply to a message from rank %d that is not a call: %w", m.src, ErrInvalid)
	}
	if m.replied {
		return fmt.Errorf("am: second reply to a call from rank %d: %w", m.src, ErrInvalid)
	}
	return m.reply(replyOK, b)
}

// reply sends the reply [status][b] to the caller.
func (m *Msg) reply(status byte, b []byte) error {
	m.replied = true
	e := m.e
	if m.src == e.rank {
		e.pmu.Lock()
		pc := e.pending[m.token]
		delete(e.pending, m.token)
		e.pmu.Unlock()
		if pc != nil {
			r := append(append(pc.buf[:0], status), b...)
			e.deliver(pc, r)
		}
		return nil
	}
	if err := e.flushTo(m.src); err != nil {
		return err
	}
	buf, own := e.sendBuf(1 + len(b))
	buf[0] = status
	copy(buf[1:], b)
	r, err := e.req.Isend(buf, m.src, flagReply|int(m.token))
	if err != nil {
		e.doneBuf(buf, own, true)
		return fmt.Errorf("am: reply to rank %d: %w", m.src, err)
	}
	idle, err := e.complete(&m.f.hctx, "reply", m.src, r)
	e.doneBuf(buf, own, idle)
	return err
}
