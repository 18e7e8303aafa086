package endpoint

// Partitioned messages (MPI 4's MPI_Psend_init, MPI_Precv_init,
// MPI_Pready, MPI_Parrived): a buffer sent in partitions, each going out
// as soon as the program marks it ready, and each visible at the receiver
// as soon as it has arrived.
//
// The protocol: PsendInit takes a sender id (unique among the live
// partitioned sends of its endpoint) and sends a handshake — the sender's
// partition count, its buffer's length and its id — on the communicator's
// partitioned context under the user's tag; PrecvInit posts the receive
// of it, so that partitioned sends and receives pair in the order they
// were initialised, as MPI pairs them, and never meet ordinary messages.
// The partitions marked by one call (a Pready, or each run of consecutive
// partitions of a PreadyRange or PreadyList) then go as one message on the
// partitions' context under tag id<<partBits | i, i the run's first
// partition, straight from and into the users' buffers (the transports'
// eager or rendezvous protocols by its size). A receiver learns the
// sender's partitioning from the handshake and posts, at each Start, one
// receive per send partition, each reaching from the partition's place to
// the end of the buffer: a run lands whole in the receive of its first
// partition, whose length says how many partitions it held, and the
// receives of the others are cancelled. The two sides may partition the
// same bytes differently. Rounds reuse the pairing: messages of one
// (source, context, tag) arrive in order, and a receive is posted only
// from its round's Start on, so a partition of the next round never lands
// in a buffer still being read.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
)

const (
	// partBits is the tag bits of a partition's index.
	partBits = 12
	// MaxPartitions is the most partitions of one partitioned send or
	// receive.
	MaxPartitions = 1 << partBits
	// partMaxIDs is the partitioned sends one endpoint may hold at once:
	// an id and a partition index fill the tag's bits below its top one.
	partMaxIDs = 1 << (tagBits - 1 - partBits)
	// partHsLen is the handshake's length: partitions u32, bytes u64, id u32.
	partHsLen = 16
)

// Partitioned is a partitioned send or receive (MPI_Psend_init,
// MPI_Precv_init): a persistent operation whose buffer is split into equal
// partitions. After Start, the sender marks each partition ready with
// Pready as soon as it holds its final data, and that partition is sent at
// once, while the others are still being computed (partitions marked
// together, by PreadyRange or PreadyList, go as one message); the receiver may use
// each partition as soon as Parrived reports it, before the whole message
// has come. Wait (or Test) ends the round; the next Start begins another
// with the same buffers and peers.
//
// The sender's and the receiver's partition counts may differ; their
// buffers must have the same length. Partitioned sends and receives pair
// by source, destination, tag and communicator, in the order they were
// initialised, and never match ordinary messages.
//
// Like its handle, a Partitioned is used by one goroutine at a time, with
// one exception: on a shared endpoint (the world communicator, or handles
// made with Shared(true)), which any goroutine may drive, Pready and
// Parrived may be called by several goroutines at once — each worker
// marking the partition it has computed — while another waits in Wait.
type Partitioned struct {
	c     *Comm
	send  bool
	buf   []byte
	parts int // this side's partitions
	peer  int
	tag   int

	mu     sync.Mutex
	id     int        // the sender's id (a receiver's: from the handshake)
	hsBuf  []byte     // the handshake: sent, or received
	hs     *Request   // the handshake in flight (nil once its completion is taken)
	paired bool       // a receiver has the handshake (its own side: always)
	sparts int        // the sender's partitions
	reqs   []*Request // this round's message starting at each send partition (nil: none)
	runs   []int      // a send's: the partitions reqs[i] carries; a receive's: -1 where covered by an earlier message
	marked []bool     // a send's partitions marked ready this round
	done   []bool     // send partition i has completed (sent, or arrived)
	ndone  int
	active bool
	rounds int // rounds started
	freed  bool
	err    error // a failure that ends the round (and the pairing)
}

// PsendInit sets up a partitioned send of buf to dest with tag, in
// partitions equal parts (len(buf) a multiple of partitions, at most
// MaxPartitions). It sends a small handshake to the receiver; the
// partitions move only after Start and Pready. dest may be ProcNull.
func (c *Comm) PsendInit(buf []byte, partitions, dest, tag int) (*Partitioned, error) {
	p, err := c.partitioned(true, buf, partitions, dest, tag)
	if err != nil || dest == ProcNull {
		return p, err
	}
	v := c.v
	v.lock()
	id := -1
	for w, used := range v.partIDs {
		if used != ^uint64(0) {
			b := bits.TrailingZeros64(^used)
			v.partIDs[w] |= 1 << b
			id = w*64 + b
			break
		}
	}
	v.unlock()
	if id < 0 {
		return nil, fmt.Errorf("endpoint: partitioned send: %d partitioned sends of this endpoint are live already: %w", partMaxIDs, ErrInvalid)
	}
	p.id, p.sparts, p.paired = id, partitions, true
	p.runs = make([]int, partitions)
	binary.LittleEndian.PutUint32(p.hsBuf, uint32(partitions))
	binary.LittleEndian.PutUint64(p.hsBuf[4:], uint64(len(buf)))
	binary.LittleEndian.PutUint32(p.hsBuf[12:], uint32(id))
	if p.hs, err = c.isend(p.hsBuf, dest, tag, c.partCtx()); err != nil {
		p.freeID()
		return nil, fmt.Errorf("endpoint: partitioned send handshake: %w", err)
	}
	return p, nil
}

// PrecvInit sets up a partitioned receive into buf from src with tag, in
// partitions equal parts (len(buf) a multiple of partitions, at most
// MaxPartitions); src may be ProcNull, not AnySource, and tag not AnyTag.
// It posts the receive of the sender's handshake; the partitions arrive
// after Start.
func (c *Comm) PrecvInit(buf []byte, partitions, src, tag int) (*Partitioned, error) {
	p, err := c.partitioned(false, buf, partitions, src, tag)
	if err != nil || src == ProcNull {
		return p, err
	}
	if p.hs, err = c.irecv(p.hsBuf, src, tag, c.partCtx()); err != nil {
		return nil, fmt.Errorf("endpoint: partitioned receive handshake: %w", err)
	}
	return p, nil
}

func (c *Comm) partitioned(send bool, buf []byte, partitions, peer, tag int) (*Partitioned, error) {
	if err := c.usable("partitioned init"); err != nil {
		return nil, err
	}
	if peer != ProcNull {
		if err := c.checkPeer(peer, false); err != nil {
			return nil, err
		}
	}
	if err := checkTag(tag, false); err != nil {
		return nil, err
	}
	if partitions < 1 || partitions > MaxPartitions || len(buf)%partitions != 0 {
		return nil, fmt.Errorf("endpoint: partitioned init: %d bytes in %d partitions (1..%d, dividing the length): %w", len(buf), partitions, MaxPartitions, ErrInvalid)
	}
	return &Partitioned{c: c, send: send, buf: buf, parts: partitions, peer: peer, tag: tag,
		hsBuf: make([]byte, partHsLen), paired: peer == ProcNull}, nil
}

// Partitions returns the number of partitions of p's buffer.
func (p *Partitioned) Partitions() int {
	if p == nil {
		return 0
	}
	return p.parts
}

// usable reports an error for a nil or freed p, or one not started.
func (p *Partitioned) usable(op string, started bool) error {
	switch {
	case p == nil || p.freed:
		return fmt.Errorf("endpoint: %s on a freed or nil partitioned request: %w", op, ErrInvalid)
	case started && !p.active:
		return fmt.Errorf("endpoint: %s on a partitioned request not started: %w", op, ErrInvalid)
	}
	return p.c.usable(op)
}

// Start begins a round. Starting a round while the last one has not
// completed is an error wrapping ErrInvalid.
func (p *Partitioned) Start() error {
	if p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	if err := p.usable("partitioned start", false); err != nil {
		return err
	}
	if p.active {
		return fmt.Errorf("endpoint: partitioned start: the last round has not completed: %w", ErrInvalid)
	}
	if p.err != nil {
		return p.err
	}
	p.active, p.ndone = true, 0
	p.rounds++
	clear(p.marked)
	clear(p.done)
	if p.send && p.peer != ProcNull {
		p.c.count(p.peer, len(p.buf)) // one message a round, whatever its partitions
	}
	if !p.send && p.paired && p.peer != ProcNull {
		return p.postRecvs()
	}
	return nil
}

// Pready marks send partition i ready and sends it (MPI_Pready). Marking
// a partition twice in a round, or one outside 0..Partitions()-1, is an
// error wrapping ErrInvalid.
func (p *Partitioned) Pready(i int) error { return p.PreadyRange(i, i) }

// PreadyRange marks send partitions lo through hi ready (MPI_Pready_range)
// and sends them as one message.
func (p *Partitioned) PreadyRange(lo, hi int) error {
	if lo > hi {
		return fmt.Errorf("endpoint: pready of partitions %d..%d: %w", lo, hi, ErrInvalid)
	}
	return p.markReady(hi-lo+1, func(k int) int { return lo + k })
}

// PreadyList marks the send partitions listed ready (MPI_Pready_list):
// each run of consecutive partitions in the list goes as one message.
// Nothing is marked when one of them is out of range or marked already.
func (p *Partitioned) PreadyList(list ...int) error {
	return p.markReady(len(list), func(k int) int { return list[k] })
}

// markReady marks the n partitions at(0), at(1), ... ready, or none when
// one is out of range or marked already, and sends each run of
// consecutive ones as one message.
func (p *Partitioned) markReady(n int, at func(k int) int) error {
	if p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	if err := p.usable("pready", true); err != nil {
		return err
	}
	if !p.send {
		return fmt.Errorf("endpoint: pready on a partitioned receive: %w", ErrInvalid)
	}
	if p.marked == nil {
		p.marked, p.done, p.reqs = make([]bool, p.parts), make([]bool, p.parts), make([]*Request, p.parts)
		if p.runs == nil {
			p.runs = make([]int, p.parts)
		}
	}
	for k := range n {
		var err error
		switch i := at(k); {
		case i < 0 || i >= p.parts:
			err = fmt.Errorf("endpoint: pready of partition %d of %d: %w", i, p.parts, ErrInvalid)
		case p.marked[i]:
			err = fmt.Errorf("endpoint: pready: partition %d is ready already: %w", i, ErrInvalid)
		default:
			p.marked[i] = true
			continue
		}
		for j := range k {
			p.marked[at(j)] = false // this call marks nothing
		}
		return err
	}
	for start := 0; start < n; {
		end := start + 1
		for end < n && at(end) == at(end-1)+1 {
			end++
		}
		if err := p.sendRun(at(start), end-start); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// sendRun sends the k partitions from lo, marked, as one message (p.mu held),
// tagged with lo: the receiver's receive of partition lo reaches to the
// end of its buffer, and the message's length says how many it holds.
// Empty partitions go one message each, as a length cannot count them.
func (p *Partitioned) sendRun(lo, k int) error {
	n := len(p.buf) / p.parts
	if n == 0 && k > 1 {
		for i := lo; i < lo+k; i++ {
			if err := p.sendRun(i, 1); err != nil {
				return err
			}
		}
		return nil
	}
	if p.peer == ProcNull {
		for i := lo; i < lo+k; i++ {
			p.done[i] = true
		}
		p.ndone += k
		return nil
	}
	r, err := p.c.isend(p.buf[lo*n:(lo+k)*n], p.peer, p.id<<partBits|lo, p.c.partDataCtx())
	if err != nil {
		p.err = fmt.Errorf("endpoint: pready of partitions %d..%d: %w", lo, lo+k-1, err)
		return p.err
	}
	p.reqs[lo], p.runs[lo] = r, k
	return nil
}

// pair takes the sender's handshake into a receive (p.mu held), once it
// has come; with wait, it waits for it.
func (p *Partitioned) pair(ctx context.Context, wait bool) error {
	if p.paired || p.err != nil {
		return p.err
	}
	var err error
	if wait {
		_, err = p.hs.Wait(ctx)
	} else {
		var ok bool
		if ok, _, err = p.hs.Test(); err == nil && !ok {
			return nil
		}
	}
	if err != nil {
		if ctx.Err() == nil || !wait {
			p.err = fmt.Errorf("endpoint: partitioned receive handshake: %w", err)
		}
		return fmt.Errorf("endpoint: partitioned receive handshake: %w", err)
	}
	p.hs.Release()
	p.hs = nil
	sparts := int(binary.LittleEndian.Uint32(p.hsBuf))
	n := binary.LittleEndian.Uint64(p.hsBuf[4:])
	if n != uint64(len(p.buf)) || sparts < 1 || sparts > MaxPartitions {
		p.err = fmt.Errorf("endpoint: partitioned receive of %d bytes paired with a send of %d bytes in %d partitions from rank %d (tag %d): %w", len(p.buf), n, sparts, p.peer, p.tag, ErrInvalid)
		return p.err
	}
	p.id, p.sparts, p.paired = int(binary.LittleEndian.Uint32(p.hsBuf[12:])), sparts, true
	if p.active {
		return p.postRecvs()
	}
	return nil
}

// postRecvs posts this round's receive of every send partition (p.mu
// held, paired): partition i's reaches from its place to the end of the
// buffer, so that a message of several partitions lands whole.
func (p *Partitioned) postRecvs() error {
	if p.reqs == nil {
		p.reqs, p.done, p.runs = make([]*Request, p.sparts), make([]bool, p.sparts), make([]int, p.sparts)
	}
	n := len(p.buf) / p.sparts
	for i := range p.reqs {
		r, err := p.c.irecv(p.buf[i*n:], p.peer, p.id<<partBits|i, p.c.partDataCtx())
		if err != nil {
			p.err = fmt.Errorf("endpoint: partitioned receive of partition %d: %w", i, err)
			return p.err
		}
		p.reqs[i] = r
	}
	return nil
}

// sweep takes the completions of this round's messages (p.mu held) that
// start at send partitions up to hi, with one look at the endpoint (its
// progress driven once, not once a request). A receive's length says how
// many partitions its message held; the receives of the others are
// cancelled (they stay in reqs, released at the end of the round).
func (p *Partitioned) sweep(hi int) error {
	n := 0
	if p.sparts > 0 {
		n = len(p.buf) / p.sparts
	}
	v := p.c.v
	v.lock()
	defer v.unlock()
	polled := false
	for i := 0; i <= hi && i < len(p.reqs); i++ {
		r := p.reqs[i]
		if r == nil || p.done[i] || p.runs[i] < 0 {
			continue
		}
		if !r.done && !polled {
			if err := v.progress(); err != nil {
				return err
			}
			polled = true
		}
		if !r.done {
			continue
		}
		if r.err != nil {
			p.err = fmt.Errorf("endpoint: partition %d: %w", i, r.err)
			return p.err
		}
		k := p.runs[i] // a send: the partitions it sent
		if !p.send {
			k = 1
			if n > 0 {
				k = r.st.Count / n
			}
			if k < 1 || i+k > p.sparts || n > 0 && r.st.Count%n != 0 {
				p.err = fmt.Errorf("endpoint: partitioned receive: a message of %d bytes at partition %d of %d of %d bytes: %w", r.st.Count, i, p.sparts, n, ErrInvalid)
				return p.err
			}
			for j := i + 1; j < i+k; j++ {
				if p.done[j] {
					p.err = fmt.Errorf("endpoint: partitioned receive: partition %d arrived twice: %w", j, ErrInvalid)
					return p.err
				}
				v.cancel(p.reqs[j])
				p.runs[j] = -1 // covered: its receive is cancelled
			}
		}
		for j := i; j < i+k; j++ {
			p.done[j] = true
		}
		p.ndone += k
	}
	return nil
}

// Parrived reports whether receive partition i has arrived whole
// (MPI_Parrived); each call also moves the others along. Once the round
// has completed (another goroutine's Wait or Test ended it), every
// partition has arrived.
func (p *Partitioned) Parrived(i int) (bool, error) {
	if p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	if p != nil && !p.freed && !p.active && p.rounds > 0 && p.err == nil && !p.send && i >= 0 && i < p.parts {
		return true, nil
	}
	if err := p.usable("parrived", true); err != nil {
		return false, err
	}
	if p.send {
		return false, fmt.Errorf("endpoint: parrived on a partitioned send: %w", ErrInvalid)
	}
	if i < 0 || i >= p.parts {
		return false, fmt.Errorf("endpoint: parrived of partition %d of %d: %w", i, p.parts, ErrInvalid)
	}
	if p.peer == ProcNull {
		return true, nil
	}
	if err := p.pair(context.Background(), false); err != nil || !p.paired {
		return false, err
	}
	// The send partitions that hold receive partition i's bytes (both
	// sides cut the same length into equal parts).
	lo, hi := i*p.sparts/p.parts, ((i+1)*p.sparts+p.parts-1)/p.parts-1
	if err := p.sweep(hi); err != nil {
		return false, err
	}
	for j := lo; j <= hi; j++ {
		if !p.done[j] {
			return false, nil
		}
	}
	return true, nil
}

// complete reports whether the round has completed (p.mu held), taking
// completions without waiting.
func (p *Partitioned) complete() (bool, error) {
	all := p.sparts
	if p.send {
		all = p.parts
	}
	if p.peer == ProcNull {
		return !p.send || p.ndone == all, nil
	}
	if !p.send {
		if err := p.pair(context.Background(), false); err != nil || !p.paired {
			return false, err
		}
	} else if p.hs != nil {
		ok, _, err := p.hs.Test()
		if err != nil {
			p.err = fmt.Errorf("endpoint: partitioned send handshake: %w", err)
			return false, p.err
		}
		if ok {
			p.hs.Release()
			p.hs = nil
		}
	}
	if err := p.sweep(len(p.reqs) - 1); err != nil {
		return false, err
	}
	return p.hs == nil && p.ndone == all, nil
}

// finish ends a round (p.mu held): every message's request, and every
// cancelled receive's, goes back to the endpoint.
func (p *Partitioned) finish() {
	v := p.c.v
	v.lock()
	for i, r := range p.reqs {
		if r != nil && r.v == v && r.releasable() == nil {
			v.keepReleased(r)
		}
		p.reqs[i] = nil
	}
	v.unlock()
	clear(p.runs)
	p.active = false
}

// Test reports whether the round has completed, ending it if so; it
// never waits. A send completes once every partition was marked ready and
// has been sent (its buffer may be written again), a receive once every
// partition has arrived.
func (p *Partitioned) Test() (bool, error) {
	if p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	if err := p.usable("partitioned test", true); err != nil {
		return false, err
	}
	ok, err := p.complete()
	if err != nil || ok {
		p.finish()
	}
	return ok, err
}

// Wait waits for the round to complete (see Test) or ctx to end. A send
// waits for partitions other goroutines have still to mark ready.
func (p *Partitioned) Wait(ctx context.Context) error {
	if p != nil {
		p.mu.Lock()
	}
	err := p.usable("partitioned wait", true)
	if err == nil && !p.send && !p.paired {
		// A receive first waits for its sender's handshake (holding p,
		// as Parrived can tell nothing before it).
		if err = p.pair(ctx, true); p.err != nil {
			p.finish() // the pairing failed: the round ends with it
		}
	}
	if err != nil {
		if p != nil {
			p.mu.Unlock()
		}
		return err
	}
	for spins := 1; ; spins++ {
		ok, err := p.complete()
		if err != nil || ok {
			p.finish()
			p.mu.Unlock()
			return err
		}
		// The message to wait for: a receive's first partition not in
		// yet (which a message of its own must bring: any earlier one has
		// been taken whole), or a send's first one not sent yet; WaitAll
		// waits for it (p left to Parrived and Pready meanwhile, which
		// never release a request before the round ends).
		var next *Request
		if p.hs == nil && p.peer != ProcNull {
			for i, d := range p.done {
				if !d {
					if p.reqs[i] != nil && p.runs[i] >= 0 && (!p.send || p.marked[i]) {
						next = p.reqs[i]
					}
					break
				}
			}
		}
		crowded := p.c.v.crowded
		p.mu.Unlock()
		if next != nil {
			if err := WaitAll(ctx, next); err != nil && ctx.Err() != nil {
				return fmt.Errorf("endpoint: partitioned wait: %w", err)
			}
		} else {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("endpoint: partitioned wait: %w", err)
			}
			idle(spins, crowded, false) // a send waits for marks: drives the process's other endpoints too
		}
		p.mu.Lock()
	}
}

// Free releases p; a round in flight must have completed. A partitioned
// send gives its id back, for the endpoint's later partitioned sends.
func (p *Partitioned) Free() error {
	if p == nil || p.freed {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active {
		return fmt.Errorf("endpoint: free of a partitioned request whose round has not completed: %w", ErrInvalid)
	}
	if p.hs != nil {
		// A handshake never taken: a receive whose sender never
		// initialised is cancelled; a send's is left to complete.
		if !p.send {
			p.hs.Cancel()
		}
		p.hs = nil
	}
	p.freed = true
	if p.send && p.peer != ProcNull {
		p.freeID()
	}
	return nil
}

// freeID gives the sender id back to the endpoint.
func (p *Partitioned) freeID() {
	v := p.c.v
	v.lock()
	v.partIDs[p.id/64] &^= 1 << (p.id % 64)
	v.unlock()
}
