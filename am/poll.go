package am

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/wait"
)

// maxDepth bounds the nesting of handlers: a Poll inside handlers this
// deep (a handler's Send, Call or Reply that has to wait) is an error.
const maxDepth = 16

// frame is what one level of handlers uses: the message being handled,
// its receive buffer, the buffer of a payload taken with Payload (or left
// unread), and the context its handler runs with.
type frame struct {
	mm    endpoint.Message // the message taken from the inbox
	msg   Msg
	rbuf  []byte
	scrap []byte
	hctx  handlerCtx
}

// handlerCtx is the context a handler runs with: its poller's context,
// marked so that a Poll made with it (directly, or by Send or Call inside
// the handler) runs further handlers one level deeper instead of finding
// the engine busy.
type handlerCtx struct {
	context.Context
	e     *Engine
	depth int
}

type ctxKey struct{}

// clear drops the frame's context once its Poll returns.
func (f *frame) clear() { f.hctx.Context = nil }

// Value returns the handlerCtx itself for ctxKey.
func (c *handlerCtx) Value(k any) any {
	if k == (ctxKey{}) {
		return c
	}
	return c.Context.Value(k)
}

// Poll runs the handlers of messages that have arrived and delivers the
// replies of this rank's calls (at most 64 of both); it returns how many
// it took. While another goroutine polls this engine it returns at once,
// taking none (that goroutine delivers this one's replies). Inside a handler, a Poll given the handler's context
// (as Send and Call given it poll) runs further handlers, nested, so that
// a handler may wait for a peer that is itself waiting for this rank;
// handlers therefore start in the order their messages were sent but may
// run nested in one another. A handler's error for a message sent with
// Send ends the Poll; the messages after it stay for the next.
func (e *Engine) Poll(ctx context.Context) (int, error) {
	if err := e.usable("poll"); err != nil {
		return 0, err
	}
	if err := e.flushAll(); err != nil {
		return 0, err
	}
	depth := 0
	if !e.pollMu.TryLock() {
		h, ok := ctx.Value(ctxKey{}).(*handlerCtx)
		if !ok || h.e != e {
			return 0, nil
		}
		if h.depth >= maxDepth {
			return 0, fmt.Errorf("am: poll inside %d nested handlers: %w", h.depth, ErrInvalid)
		}
		depth = h.depth
		return e.poll(ctx, depth)
	}
	defer e.pollMu.Unlock()
	return e.poll(ctx, 0)
}

// poll is Poll at nesting depth depth, with pollMu held.
func (e *Engine) poll(ctx context.Context, depth int) (int, error) {
	for len(e.frames) <= depth {
		e.frames = append(e.frames, &frame{})
	}
	f := e.frames[depth]
	f.hctx = handlerCtx{Context: ctx, e: e, depth: depth + 1}
	defer f.clear()
	n := 0
	for n < maxPoll {
		ran, err := e.pollSelf(f)
		if ran {
			n++
		}
		if err != nil {
			return n, err
		}
		if ran {
			continue
		}
		if ok, err := e.nextRecord(f); ok || err != nil {
			if err != nil {
				return n, err
			}
			n++
			if err := e.dispatch(f); err != nil {
				return n, err
			}
			continue
		}
		if e.inHead == e.inEnd {
			k, err := e.req.ImprobeBatch(endpoint.AnySource, endpoint.AnyTag, e.inbox[:])
			if err != nil {
				return n, fmt.Errorf("am: poll: %w", err)
			}
			if k == 0 {
				break
			}
			e.inHead, e.inEnd = 0, k
		}
		// The frame's own copy: a nested Poll may refill the inbox.
		f.mm, e.inbox[e.inHead] = e.inbox[e.inHead], endpoint.Message{}
		e.inHead++
		mm := &f.mm
		switch tag := mm.Status().Tag; {
		case tag&flagReply != 0:
			n++
			err = e.reply(f, mm)
		case tag&flagBatch != 0: // its records count as they run
			err = e.takeBatch(f, mm)
		default:
			n++
			err = e.handle(f, mm)
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// pollSelf runs the oldest message this rank sent itself, if any.
func (e *Engine) pollSelf(f *frame) (bool, error) {
	if e.selfN.Load() == 0 {
		return false, nil
	}
	e.selfMu.Lock()
	if len(e.selfQ) == 0 {
		e.selfMu.Unlock()
		return false, nil
	}
	s := e.selfQ[0]
	e.selfQ[0] = selfMsg{}
	e.selfQ = e.selfQ[1:]
	e.selfN.Add(-1)
	e.selfMu.Unlock()
	f.msg = Msg{e: e, f: f, src: e.rank, id: s.id, token: s.token,
		header: s.b[:s.hlen], payload: s.b[s.hlen:], plen: len(s.b) - s.hlen}
	return true, e.dispatch(f)
}

// handle receives request message mm and runs its handler.
func (e *Engine) handle(f *frame, mm *endpoint.Message) error {
	st := mm.Status()
	if cap(f.rbuf) < st.Count {
		f.rbuf = make([]byte, st.Count)
	}
	b := f.rbuf[:st.Count]
	if _, err := mm.Mrecv(f.hctx.Context, b); err != nil {
		e.handled.Add(1)
		return fmt.Errorf("am: receive from rank %d: %w", st.Source, err)
	}
	m := &f.msg
	*m = Msg{e: e, f: f, src: st.Source, id: st.Tag & idMask}
	bad := len(b) < prefixLen
	if !bad {
		hlen := int(binary.LittleEndian.Uint32(b))
		m.token = binary.LittleEndian.Uint32(b[4:])
		rest := b[prefixLen:]
		switch {
		case hlen > len(rest):
			bad = true
		case st.Tag&flagFollows != 0:
			if len(rest) != hlen+followLen {
				bad = true
				break
			}
			m.header, m.follows = rest[:hlen], true
			m.plen = int(binary.LittleEndian.Uint64(rest[hlen:]))
		default:
			m.header, m.payload, m.plen = rest[:hlen], rest[hlen:], len(rest)-hlen
		}
	}
	if bad || (st.Tag&flagCall != 0) != (m.token != 0) {
		e.handled.Add(1)
		return fmt.Errorf("am: malformed message of %d bytes from rank %d: %w", len(b), st.Source, ErrInvalid)
	}
	return e.dispatch(f)
}

// dispatch runs the handler of f's message, takes a following payload
// nobody read, and answers a call.
func (e *Engine) dispatch(f *frame) error {
	defer e.handled.Add(1)
	m := &f.msg
	if e.prof != nil {
		e.prof.of(m.id).handled.Add(1)
	}
	var err error
	if h := e.handler(m.id); h == nil {
		err = fmt.Errorf("am: message for handler %d from rank %d: no such handler: %w", m.id, m.src, ErrInvalid)
	} else {
		err = h(&f.hctx, m)
	}
	if m.follows && !m.taken {
		f.scrap = slices.Grow(f.scrap[:0], m.plen)
		if _, perr := m.ReadPayload(f.scrap[:m.plen]); perr != nil && err == nil {
			err = perr
		}
	}
	m.follows = false
	if m.token != 0 && !m.replied {
		if err != nil {
			// The caller gets the error; this rank goes on.
			return m.reply(replyErr, []byte(err.Error()))
		}
		return m.reply(replyOK, nil)
	}
	return err
}

// reply delivers reply message mm to its call.
func (e *Engine) reply(f *frame, mm *endpoint.Message) error {
	st := mm.Status()
	tok := uint32(st.Tag & tokenMask)
	e.pmu.Lock()
	pc := e.pending[tok]
	if pc != nil && pc.dest == st.Source {
		delete(e.pending, tok)
	} else {
		pc = nil
	}
	e.pmu.Unlock()
	if pc == nil { // its call gave up: drop it
		f.scrap = slices.Grow(f.scrap[:0], st.Count)
		if _, err := mm.Mrecv(f.hctx.Context, f.scrap[:st.Count]); err != nil {
			return fmt.Errorf("am: receive a late reply: %w", err)
		}
		return nil
	}
	b := slices.Grow(pc.buf[:0], st.Count)[:st.Count]
	if _, err := mm.Mrecv(f.hctx.Context, b); err != nil {
		pc.err = fmt.Errorf("am: receive the reply of rank %d: %w", st.Source, err)
	}
	e.deliver(pc, b)
	return nil
}

// deliver completes call pc with reply message b ([status][bytes]).
func (e *Engine) deliver(pc *pendingCall, b []byte) {
	switch {
	case pc.err != nil:
	case len(b) == 0:
		pc.err = fmt.Errorf("am: empty reply from rank %d: %w", pc.dest, ErrInvalid)
	case b[0] == replyErr:
		pc.err = fmt.Errorf("am: call on rank %d: %s: %w", pc.dest, b[1:], ErrRemote)
	default:
		pc.buf = b[:copy(b, b[1:])]
	}
	pc.done.Store(true)
}

// Serve runs handlers as messages arrive until ctx ends or the engine is
// closed (it then returns nil) or a Poll fails. While nothing arrives it spins briefly, then
// yields and naps (at most 100 µs), so an idle Serve costs little CPU.
func (e *Engine) Serve(ctx context.Context) error {
	w := wait.Waiter{P: &e.policy}
	for {
		n, err := e.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil || e.closed.Load() {
				return nil
			}
			return err
		}
		if n > 0 {
			w = wait.Waiter{P: &e.policy}
			continue
		}
		if w.Pause() && (ctx.Err() != nil || e.closed.Load()) {
			return nil
		}
	}
}
