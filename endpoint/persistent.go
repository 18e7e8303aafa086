package endpoint

import (
	"context"
	"fmt"

	"github.com/weft-hpc/weft/ddt"
)

// Persistent is a send or receive set up once and started many times
// (MPI_Send_init, MPI_Recv_init, MPI_Start): the halo exchange of an
// iterative solver repeats the same transfers every step, and a started
// persistent operation reuses its request and its packing buffer instead
// of allocating them again. Like the handle it belongs to, a Persistent
// is used by one goroutine at a time.
type Persistent struct {
	c      *Comm
	send   bool
	buf    []byte
	count  int
	t      *ddt.Type
	peer   int
	tag    int
	packed []byte     // packing buffer of a non-contiguous send
	contig []byte     // the bytes of a contiguous layout
	u      *typedRecv // a non-contiguous receive's layout (it unpacks as data arrives)
	r      *Request   // the round in flight (or last completed), nil before Start
	null   *Request   // the completed receive a ProcNull peer gives, reused
	layout *typedRecv // a non-contiguous send's layout
	freed  bool
}

// SendInit sets up a persistent send of count elements of t from buf to
// dest with tag; nothing moves until Start. dest may be ProcNull.
func (c *Comm) SendInit(buf []byte, count int, t *ddt.Type, dest, tag int) (*Persistent, error) {
	return c.persistent(true, buf, count, t, dest, tag)
}

// RecvInit sets up a persistent receive of at most count elements of t
// into buf from src (AnySource, ProcNull) with tag (AnyTag).
func (c *Comm) RecvInit(buf []byte, count int, t *ddt.Type, src, tag int) (*Persistent, error) {
	return c.persistent(false, buf, count, t, src, tag)
}

func (c *Comm) persistent(send bool, buf []byte, count int, t *ddt.Type, peer, tag int) (*Persistent, error) {
	if err := c.usable("persistent request"); err != nil {
		return nil, err
	}
	if peer != ProcNull {
		if err := c.checkPeer(peer, !send); err != nil {
			return nil, err
		}
	}
	if err := checkTag(tag, !send); err != nil {
		return nil, err
	}
	contig, ok, n, err := typedView(buf, count, t)
	if err != nil {
		return nil, err
	}
	p := &Persistent{c: c, send: send, buf: buf, count: count, t: t, peer: peer, tag: tag, contig: contig}
	switch {
	case ok:
	case send:
		p.packed = make([]byte, n)
		p.layout = &typedRecv{buf: buf, count: count, t: t, n: n}
	default:
		p.u = &typedRecv{buf: buf, count: count, t: t, n: n}
	}
	return p, nil
}

// Start begins one round and returns its request, for Wait, Test or
// WaitAll with other requests. The request stands for this round only: the
// next Start hands it back to the endpoint (Request.Release), so it must
// not be used after that. Starting a persistent operation whose previous
// round has not completed is an error wrapping ErrInvalid.
func (p *Persistent) Start() (*Request, error) {
	if p == nil || p.freed {
		return nil, fmt.Errorf("endpoint: start of a freed or nil persistent request: %w", ErrInvalid)
	}
	if p.r != nil {
		if !p.r.Done() {
			return nil, fmt.Errorf("endpoint: start of a persistent %s whose previous round is in flight: %w", p.kind(), ErrInvalid)
		}
		p.r.Release()
		p.r = nil
	}
	var r *Request
	var err error
	switch {
	case p.send && p.packed != nil && p.peer == ProcNull:
		r = completedRequest
	case p.send && p.packed != nil:
		var done bool
		if r, done, err = p.c.isendPackedNode(p.layout, p.peer, p.tag, false); done {
			err = p.c.counted(p.peer, p.layout.n, err)
			break // packed into the ring or a staging buffer
		}
		if r, done, err = p.c.isendFabricTyped(p.layout, p.peer, p.tag); done {
			err = p.c.counted(p.peer, p.layout.n, err)
			break // libfabric: a segment buffer, zero copy or the pipeline
		}
		if _, err = p.t.Pack(p.packed, p.buf, p.count); err != nil {
			return nil, fmt.Errorf("endpoint: pack %d elements of %s: %w", p.count, p.t, err)
		}
		// packed is reused by the next round, which starts only once this
		// one is complete: sent as user memory, not handed over.
		r, err = p.c.Isend(p.packed, p.peer, p.tag)
		if err == nil && p.c.link(p.peer) == nil {
			pathStats.packed.Add(1)
		}
	case p.send:
		r, err = p.c.Isend(p.contig, p.peer, p.tag)
	case !p.send && p.peer == ProcNull:
		if p.null == nil {
			p.null = procNullRecv()
		}
		r = p.null
	case p.u != nil:
		r, err = p.c.irecvReq(nil, p.peer, p.tag, p.c.ctx, false, p.u)
	default:
		r, err = p.c.Irecv(p.contig, p.peer, p.tag)
	}
	if err != nil {
		return nil, err
	}
	p.r = r
	return r, nil
}

// Wait waits for the current round (see Request.Wait); without a round
// started it returns at once.
func (p *Persistent) Wait(ctx context.Context) (Status, error) {
	if p == nil || p.r == nil {
		return Status{}, nil
	}
	return p.r.Wait(ctx)
}

// Free releases the persistent operation. A round still in flight is
// left to complete on its own (its buffer stays in use until then);
// Free of nil or twice does nothing.
func (p *Persistent) Free() error {
	if p == nil || p.freed {
		return nil
	}
	p.freed = true
	if p.r != nil && p.r.Done() {
		p.r.Release()
	}
	p.r = nil
	return nil
}

func (p *Persistent) kind() string {
	if p.send {
		return "send"
	}
	return "receive"
}

// StartAll starts every persistent operation of ps and returns their
// requests, in order (MPI_Startall); on an error the ones already started
// stay started.
func StartAll(ps ...*Persistent) ([]*Request, error) {
	rs := make([]*Request, len(ps))
	return rs, StartAllInto(rs, ps...)
}

// StartAllInto is StartAll writing the requests into rs (len(rs) ≥
// len(ps)), so that a loop restarting the same operations allocates
// nothing.
func StartAllInto(rs []*Request, ps ...*Persistent) error {
	if len(rs) < len(ps) {
		return fmt.Errorf("endpoint: %d request slots for %d persistent operations: %w", len(rs), len(ps), ErrInvalid)
	}
	for i, p := range ps {
		r, err := p.Start()
		if err != nil {
			return fmt.Errorf("endpoint: start persistent operation %d: %w", i, err)
		}
		rs[i] = r
	}
	return nil
}
