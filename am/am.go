package am

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/wait"
)

// Sentinel errors; each is the shared sentinel of package errs of the same
// name.
var (
	// ErrInvalid reports a bad argument: a rank outside the communicator,
	// a handler id out of range or not registered, a reply to a message
	// that was not a call.
	ErrInvalid = errs.ErrInvalid
	// ErrClosed reports use of a closed engine.
	ErrClosed = errs.ErrClosed
	// ErrPeerGone reports a call whose target's process has exited.
	ErrPeerGone = errs.ErrPeerGone
	// ErrRemote reports a handler on another rank that returned an error
	// for a call: the call's error carries its text.
	ErrRemote = errs.ErrRemote
	// ErrTruncated reports a payload longer than ReadPayload's buffer.
	ErrTruncated = errs.ErrTruncated
)

// MaxHandler is the largest handler id.
const MaxHandler = 1<<16 - 1

// Handler runs an active message on its target rank. ctx is the context
// of the call that polled (Poll, Serve, Send, Call, Quiesce, Close). An
// error returned for a Call reaches the caller (wrapping ErrRemote); for a
// message sent with Send it ends the Poll (or Serve) that ran the handler.
type Handler func(ctx context.Context, m *Msg) error

// Tag bits of a request message: the handler id, then flags.
const (
	flagFollows = 1 << 16 // the payload follows as a message of the data communicator
	flagCall    = 1 << 17 // the sender waits for a reply (the prefix carries its token)
	flagReply   = 1 << 21 // a reply; the call's token is the rest of the tag
	idMask      = 1<<16 - 1
	tokenMask   = flagReply - 1

	prefixLen = 8  // header length (u32), call token (u32)
	followLen = 8  // the following payload's length (u64), after the prefix
	dataTag   = 0  // the tag of every following payload
	replyOK   = 0  // first byte of a reply: the handler returned nil
	replyErr  = 1  // ... an error, whose text follows
	maxPoll   = 64 // messages a Poll handles at most
)

// Engine carries the active messages of one rank of a communicator. Open
// returns it; Close releases it.
type Engine struct {
	prof       *profile       // the world's counts per handler, when it counts (profile.go)
	req, data  *endpoint.Comm // requests and replies (probed), following payloads
	coll       *collectives.Coll
	rank, size int
	inline     int

	hmu      sync.Mutex                // serialises Register
	handlers atomic.Pointer[[]Handler] // by id; replaced whole by Register

	pollMu sync.Mutex // held by the goroutine running handlers
	frames []*frame   // per nesting depth of handlers: the message being handled
	// inbox holds the messages a matched probe took, oldest at inHead,
	// until a Poll (at any depth) handles them in turn.
	inbox         [32]endpoint.Message
	inHead, inEnd int
	// recs is the rest of the batch being unpacked (from recSrc, in
	// recBuf), served before the inbox.
	recs      []byte
	recSrc    int
	recBuf    []byte
	batchesIn int // batches received (tests)
	agg       aggregator

	sbufMu sync.Mutex // held by the send using sbuf
	sbuf   []byte
	pool   sync.Pool // *[]byte send buffers when sbuf is taken

	pmu     sync.Mutex
	pending map[uint32]*pendingCall
	token   atomic.Uint32

	selfMu sync.Mutex
	selfQ  []selfMsg
	selfN  atomic.Int32 // len(selfQ), read without selfMu

	sent    []atomic.Int64 // request messages sent to each rank
	handled atomic.Int64   // request messages handled here

	policy wait.Policy
	closed atomic.Bool
}

// pendingCall is a Call waiting for its reply.
type pendingCall struct {
	dest int
	buf  []byte
	err  error
	done atomic.Bool
}

// selfMsg is a request to this rank itself.
type selfMsg struct {
	id    int
	hlen  int
	token uint32
	b     []byte // header, then payload
}

// Option configures Open.
type Option func(*config) error

type config struct{ inline, agg int }

// WithInlineLimit sets the largest message (an 8-byte prefix, header and
// payload) sent as one message; a larger payload follows its header as a
// message of its own that the handler may receive where it chooses.
// Every rank must give the same value. Default 8192.
func WithInlineLimit(n int) Option {
	return func(c *config) error {
		if n < prefixLen+followLen || n > 1<<30 {
			return fmt.Errorf("am: inline limit %d outside %d..%d: %w", n, prefixLen+followLen, 1<<30, ErrInvalid)
		}
		c.inline = n
		return nil
	}
}

// Open returns an engine over comm. It is collective over comm (it
// duplicates comm twice and opens a collectives handle) and bounded
// by ctx.
func Open(ctx context.Context, comm *endpoint.Comm, opts ...Option) (*Engine, error) {
	if comm == nil || comm.Size() == 0 {
		return nil, fmt.Errorf("am: Open on a nil communicator: %w", ErrInvalid)
	}
	cfg := config{inline: 8192}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("am: nil option: %w", ErrInvalid)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	e := &Engine{prof: profileFor(comm.World()), rank: comm.Rank(), size: comm.Size(), inline: cfg.inline, agg: aggregator{limit: cfg.agg},
		pending: map[uint32]*pendingCall{}, sent: make([]atomic.Int64, comm.Size()),
		policy: wait.Policy{Name: "am", SpinFor: 50 * time.Microsecond, YieldFor: time.Millisecond,
			NapMax: 100 * time.Microsecond, GoschedEvery: time.Millisecond, Contended: 20 * time.Microsecond}}
	var err error
	for _, p := range []**endpoint.Comm{&e.req, &e.data} {
		if *p, err = comm.Dup(ctx); err != nil {
			e.free()
			return nil, fmt.Errorf("am: duplicate the communicator: %w", err)
		}
	}
	if e.coll, err = collectives.New(ctx, comm); err != nil {
		e.free()
		return nil, fmt.Errorf("am: %w", err)
	}
	return e, nil
}

// free releases the communicators and the collectives handle.
func (e *Engine) free() {
	for _, c := range []*endpoint.Comm{e.req, e.data} {
		if c != nil {
			c.Free()
		}
	}
	if e.coll != nil {
		e.coll.Free()
	}
}

// Rank is this rank's number in the engine's communicator.
func (e *Engine) Rank() int { return e.rank }

// Size is the number of ranks of the engine's communicator.
func (e *Engine) Size() int { return e.size }

// Register makes h the handler of id (0..MaxHandler) on this rank,
// replacing any handler id had; a nil h removes it. Every rank that may
// receive id's messages must register it before they arrive: a message
// for an id with no handler is an error of the Poll that finds it (and of
// the call, for a Call).
func (e *Engine) Register(id int, h Handler) error {
	if err := e.usable("register"); err != nil {
		return err
	}
	if id < 0 || id > MaxHandler {
		return fmt.Errorf("am: handler id %d outside 0..%d: %w", id, MaxHandler, ErrInvalid)
	}
	e.hmu.Lock()
	defer e.hmu.Unlock()
	var hs []Handler
	if p := e.handlers.Load(); p != nil {
		hs = *p
	}
	hs = slices.Clone(hs)
	if id >= len(hs) {
		hs = append(hs, make([]Handler, id+1-len(hs))...)
	}
	hs[id] = h
	e.handlers.Store(&hs)
	return nil
}

func (e *Engine) handler(id int) Handler {
	if p := e.handlers.Load(); p != nil && id < len(*p) {
		return (*p)[id]
	}
	return nil
}

func (e *Engine) usable(op string) error {
	if e == nil {
		return fmt.Errorf("am: %s on a nil engine: %w", op, ErrInvalid)
	}
	if e.closed.Load() {
		return fmt.Errorf("am: %s on a closed engine: %w", op, ErrClosed)
	}
	return nil
}

func (e *Engine) checkSend(op string, dest, id int) error {
	if err := e.usable(op); err != nil {
		return err
	}
	if dest < 0 || dest >= e.size {
		return fmt.Errorf("am: %s to rank %d of %d: %w", op, dest, e.size, ErrInvalid)
	}
	if id < 0 || id > MaxHandler {
		return fmt.Errorf("am: %s: handler id %d outside 0..%d: %w", op, id, MaxHandler, ErrInvalid)
	}
	return nil
}

// Send runs handler id on rank dest with header and payload. It returns
// once both may be reused (a message within the inline limit: at once);
// while it waits it polls this engine. Header and payload may be empty.
func (e *Engine) Send(ctx context.Context, dest, id int, header, payload []byte) error {
	if err := e.checkSend("send", dest, id); err != nil {
		return err
	}
	return e.send(ctx, dest, id, 0, header, payload)
}

// Call runs handler id on rank dest with header and payload and returns
// the handler's reply in reply's memory when it fits (empty when the
// handler returned without replying). While it waits it polls this engine. If the
// handler fails the error wraps ErrRemote; if dest's process exits first,
// ErrPeerGone; if ctx ends first, ctx.Err() (a reply arriving later is
// dropped).
func (e *Engine) Call(ctx context.Context, dest, id int, header, payload, reply []byte) ([]byte, error) {
	if err := e.checkSend("call", dest, id); err != nil {
		return reply, err
	}
	tok := e.token.Add(1) & tokenMask
	for tok == 0 {
		tok = e.token.Add(1) & tokenMask
	}
	pc := &pendingCall{dest: dest, buf: reply[:0]}
	e.pmu.Lock()
	e.pending[tok] = pc
	e.pmu.Unlock()
	if err := e.send(ctx, dest, id, tok, header, payload); err != nil {
		e.forget(tok)
		return reply, err
	}
	err := e.until(ctx, "call", dest, pc.done.Load)
	if err != nil {
		e.forget(tok)
		if pc.done.Load() { // the reply won the race
			err = nil
		} else {
			return reply, err
		}
	}
	return pc.buf, pc.err
}

func (e *Engine) forget(tok uint32) {
	e.pmu.Lock()
	delete(e.pending, tok)
	e.pmu.Unlock()
}

// send sends one request and waits until its buffers may be reused;
// token is 0 for a plain message.
func (e *Engine) send(ctx context.Context, dest, id int, token uint32, header, payload []byte) error {
	var q Request
	if err := e.start(&q, dest, id, token, header, payload); err != nil {
		return err
	}
	return q.Wait(ctx)
}

// Request is a send in flight (Isend): Wait or Test completes it.
type Request struct {
	e         *Engine
	dest      int
	msg, data *endpoint.Request // the message and the payload that follows it; nil once over
	b         []byte            // msg's buffer (sendBuf)
	own       bool
	err       error
	fin       bool
}

// Isend starts sending what Send sends and returns at once: the header
// is copied, and payload must not be modified until the request
// completes (Wait, Test). A payload within the inline limit is copied
// too, and the request is usually complete already.
func (e *Engine) Isend(dest, id int, header, payload []byte) (*Request, error) {
	if err := e.checkSend("send", dest, id); err != nil {
		return nil, err
	}
	q := new(Request)
	if err := e.start(q, dest, id, 0, header, payload); err != nil {
		return nil, err
	}
	return q, nil
}

// start starts sending a request into q.
func (e *Engine) start(q *Request, dest, id int, token uint32, header, payload []byte) error {
	if len(header) > e.inline-prefixLen-followLen {
		return fmt.Errorf("am: header of %d bytes over the inline limit %d less %d: %w",
			len(header), e.inline, prefixLen+followLen, ErrInvalid)
	}
	*q = Request{e: e, dest: dest}
	if e.prof != nil {
		c := e.prof.of(id)
		c.sent.Add(1)
		c.bytes.Add(uint64(len(header) + len(payload)))
	}
	tag := id
	if token != 0 {
		tag |= flagCall
	}
	if e.batchable(dest, token, header, payload) {
		q.fin = true
		return e.batch(dest, id, header, payload)
	}
	if err := e.flushTo(dest); err != nil {
		return err
	}
	if dest == e.rank {
		b := make([]byte, len(header)+len(payload))
		copy(b[copy(b, header):], payload)
		e.selfMu.Lock()
		e.selfQ = append(e.selfQ, selfMsg{id: id, hlen: len(header), token: token, b: b})
		e.selfN.Add(1)
		e.selfMu.Unlock()
		e.sent[dest].Add(1)
		q.fin = true
		return nil
	}
	follows := prefixLen+len(header)+len(payload) > e.inline
	n := prefixLen + len(header)
	if follows {
		tag |= flagFollows
		n += followLen
	} else {
		n += len(payload)
	}
	b, own := e.sendBuf(n)
	binary.LittleEndian.PutUint32(b, uint32(len(header)))
	binary.LittleEndian.PutUint32(b[4:], token)
	at := prefixLen + copy(b[prefixLen:], header)
	if follows {
		binary.LittleEndian.PutUint64(b[at:], uint64(len(payload)))
	} else {
		copy(b[at:], payload)
	}
	r, err := e.req.Isend(b, dest, tag)
	if err != nil {
		e.doneBuf(b, own, true)
		return fmt.Errorf("am: send to rank %d: %w", dest, err)
	}
	e.sent[dest].Add(1)
	q.msg, q.b, q.own = r, b, own
	if r.Done() { // the usual case: copied out at once
		q.settle(ctx0)
	}
	if follows {
		if q.data, err = e.data.Isend(payload, dest, dataTag); err != nil {
			q.data = nil
			q.err = fmt.Errorf("am: send payload to rank %d: %w", dest, err)
		}
	}
	return nil
}

// ctx0 is the context of a settle that does not wait.
var ctx0 = context.Background()

// settle waits for q's message (and then its payload) and records the
// first error. A wait that ends with ctx leaves q unfinished.
func (q *Request) settle(ctx context.Context) error {
	e := q.e
	if q.msg != nil {
		idle, err := e.complete(ctx, "send", q.dest, q.msg)
		e.doneBuf(q.b, q.own, idle)
		q.msg, q.b = nil, nil
		if err != nil && q.err == nil {
			q.err = err
		}
		if !idle {
			return err
		}
	}
	if q.data != nil {
		idle, err := e.complete(ctx, "send payload", q.dest, q.data)
		if !idle {
			return err
		}
		q.data = nil
		if err != nil && q.err == nil {
			q.err = err
		}
	}
	return nil
}

// Wait polls the engine until the send completes or ctx ends, and
// returns its error.
func (q *Request) Wait(ctx context.Context) error {
	if q == nil {
		return fmt.Errorf("am: wait on a nil request: %w", ErrInvalid)
	}
	if q.fin {
		return q.err
	}
	if err := q.settle(ctx); err != nil && (q.msg != nil || q.data != nil) {
		return err
	}
	q.fin = true
	return q.err
}

// Test polls the engine once and reports whether the send has completed,
// with its error.
func (q *Request) Test() (bool, error) {
	if q == nil {
		return false, fmt.Errorf("am: test of a nil request: %w", ErrInvalid)
	}
	if q.fin {
		return true, q.err
	}
	if _, err := q.e.Poll(ctx0); err != nil {
		return false, err
	}
	if (q.msg == nil || q.msg.Done()) && (q.data == nil || q.data.Done()) {
		return true, q.Wait(ctx0)
	}
	return false, nil
}

// sendBuf returns a buffer of n bytes for a message: the engine's own
// (own true) when no other send holds it, else one from the pool.
func (e *Engine) sendBuf(n int) (b []byte, own bool) {
	if e.sbufMu.TryLock() {
		if cap(e.sbuf) < n {
			e.sbuf = make([]byte, n, max(n, 256))
		}
		return e.sbuf[:n], true
	}
	bp, _ := e.pool.Get().(*[]byte)
	if bp == nil || cap(*bp) < n {
		return make([]byte, n, max(n, 256)), false
	}
	return (*bp)[:n], false
}

// doneBuf hands back a buffer of sendBuf; idle false: a send may still
// read it, so it is dropped.
func (e *Engine) doneBuf(b []byte, own, idle bool) {
	switch {
	case own && !idle:
		e.sbuf = nil
		e.sbufMu.Unlock()
	case own:
		e.sbufMu.Unlock()
	case idle:
		e.putPool(b)
	}
}

// putPool keeps b for a later send (apart from doneBuf, whose b would
// otherwise escape on every call).
func (e *Engine) putPool(b []byte) { e.pool.Put(&b) }

// complete waits for request r, polling, and releases it; idle reports
// whether r is over (false: it was left in flight, its buffer in use).
func (e *Engine) complete(ctx context.Context, what string, dest int, r *endpoint.Request) (idle bool, err error) {
	ok, rerr := over(r) // the usual case: copied out at once
	if !ok {
		if err := e.until(ctx, what, dest, func() bool {
			ok, _, err := r.Test()
			return ok || err != nil
		}); err != nil {
			r.Cancel()
			return r.Done(), err
		}
		_, rerr = over(r)
	}
	if rerr != nil {
		return true, fmt.Errorf("am: %s to rank %d: %w", what, dest, rerr)
	}
	return true, nil
}

// over releases r if it has completed and returns its error; ok false: r
// is still in flight.
func over(r *endpoint.Request) (ok bool, err error) {
	if !r.Done() {
		return false, nil
	}
	_, _, err = r.Test()
	r.Release()
	return true, err
}

// gone returns ErrPeerGone's error when peer's process (every rank's for
// anyPeer) is known to have exited.
func (e *Engine) gone(peer int) error {
	if peer != anyPeer {
		return e.req.CheckPeer(peer)
	}
	for r := range e.size {
		if err := e.req.CheckPeer(r); err != nil {
			return err
		}
	}
	return nil
}

// anyPeer, as until's peer, watches every rank of the engine.
const anyPeer = -2

// until polls this engine until done reports true, ctx ends (an error
// wrapping ctx.Err()), or peer's process (peer ≥ 0; every rank's for
// anyPeer; none for -1) has exited.
func (e *Engine) until(ctx context.Context, what string, peer int, done func() bool) error {
	w := wait.Waiter{P: &e.policy}
	var checked time.Duration
	for {
		if done() {
			return nil
		}
		n, err := e.Poll(ctx)
		if err != nil {
			return err
		}
		if done() {
			return nil
		}
		if n > 0 {
			w, checked = wait.Waiter{P: &e.policy}, 0
			continue
		}
		if w.Pause() {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("am: %s: %w", what, err)
			}
			if el := w.Elapsed(); peer != -1 && el > 10*time.Millisecond && el-checked > 10*time.Millisecond {
				checked = el
				if err := e.gone(peer); err != nil {
					if done() {
						return nil
					}
					return fmt.Errorf("am: %s: %w", what, err)
				}
			}
		}
	}
}

// Quiesce returns once every message sent through this engine on any rank
// before that rank called Quiesce has been handled, and so has every
// message those handlers sent in turn (and so on). It is collective over
// the engine's communicator; no goroutine may Send or Call on the engine
// during it, except handlers. It polls while it waits, so the handlers
// that other ranks still need run.
//
// Each round sums, over the ranks, the messages sent to each rank and
// those handled; since handlers run while a sum is in flight, a rank's
// counts are not taken at one instant, and quiescence is declared only
// when two rounds in a row find the same sums and as many messages handled
// as sent (every count only grows, so equal sums mean no rank's count
// changed between its two readings: the job was still, and nothing was in
// flight, in between).
func (e *Engine) Quiesce(ctx context.Context) error {
	if err := e.usable("quiesce"); err != nil {
		return err
	}
	counts := make([]int64, e.size+1)
	sums := make([]int64, e.size+1)
	prev := make([]int64, e.size+1)
	for round := 0; ; round++ {
		for i := range e.sent {
			counts[i] = e.sent[i].Load()
		}
		counts[e.size] = e.handled.Load()
		r, err := collectives.Iallreduce(e.coll, counts, sums, collectives.Sum[int64]())
		if err != nil {
			return fmt.Errorf("am: quiesce: %w", err)
		}
		var rerr error
		if err := e.until(ctx, "quiesce", anyPeer, func() bool {
			ok, err := r.Test()
			rerr = err
			return ok || err != nil
		}); err != nil {
			return err
		}
		if rerr != nil {
			return fmt.Errorf("am: quiesce: %w", rerr)
		}
		if still(prev, sums, round) {
			return nil
		}
		copy(prev, sums)
		want := sums[e.rank]
		if err := e.until(ctx, "quiesce", anyPeer, func() bool { return e.handled.Load() >= want }); err != nil {
			return err
		}
	}
}

// still reports whether round's sums (messages sent to each rank, then
// messages handled) show a still job: as many handled as sent, and the
// same sums as the round before (prev).
func still(prev, sums []int64, round int) bool {
	var sent int64
	for _, s := range sums[:len(sums)-1] {
		sent += s
	}
	return sent == sums[len(sums)-1] && round > 0 && slices.Equal(sums, prev)
}

// Close waits for quiescence (Quiesce) and releases the engine; it is
// collective over the engine's communicator. Closing nil or a closed
// engine does nothing.
func (e *Engine) Close(ctx context.Context) error {
	if e == nil || e.closed.Load() {
		return nil
	}
	err := e.Quiesce(ctx)
	if e.agg.limit > 0 && err == nil { // the batches' sends are over too
		err = e.until(ctx, "close", -1, func() bool { return e.agg.pending.Load() == 0 })
	}
	e.closed.Store(true)
	e.pollMu.Lock()
	e.free()
	e.pollMu.Unlock()
	return err
}
