package collectives

import (
	"context"
	"fmt"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// Persistent is a persistent collective (MPI 4's MPI_Allreduce_init and
// its siblings): a call whose arguments are bound once, by one of the
// *Init functions, and which is then started any number of times, each
// start completed with Wait or Test before the next. A start runs as the
// call's nonblocking form does (its argument checks, its schedule, its
// progress) on the buffers bound at Init, so a loop that reduces the same
// arrays every iteration names them once. Every rank starts its
// persistent collectives, and any other collective of the handle, in the
// same order. A Persistent belongs to the goroutine that drives its
// handle.
type Persistent struct {
	c    *Coll
	id   callID
	body func(cl *Coll) error
	// hybrid: a start may combine through process memory and then among
	// processes (startNB)
	hybrid bool
	req    *Request // the start in flight; nil when inactive
	freed  bool
}

// persistent binds body, the blocking form of call id, to c.
func persistent(c *Coll, id callID, body func(cl *Coll) error) (*Persistent, error) {
	if c == nil || c.comm == nil || c.own != nil {
		return nil, fmt.Errorf("collectives: %sInit on a nil handle: %w", id, ErrInvalid)
	}
	return &Persistent{c: c, id: id, body: body}, nil
}

// Start starts the collective (MPI_Start). It fails with ErrInvalid while
// the previous start has not completed, or after Free.
func (p *Persistent) Start() error {
	if err := p.usable("Start"); err != nil {
		return err
	}
	if p.req != nil {
		return fmt.Errorf("collectives: %s Start: the previous start has not completed: %w", p.id, ErrInvalid)
	}
	r, err := p.c.startNB(p.id, p.hybrid, p.body)
	if err != nil {
		return err
	}
	p.req = r
	return nil
}

// Wait waits for the current start to complete and returns its error (see
// Request.Wait); with no start in flight it returns nil at once, as
// MPI_Wait does for an inactive persistent request.
func (p *Persistent) Wait(ctx context.Context) error {
	if err := p.usable("Wait"); err != nil {
		return err
	}
	if p.req == nil {
		return nil
	}
	err := p.req.Wait(ctx)
	p.req = nil
	return err
}

// Test drives the handle once and reports whether the current start has
// completed, with its error (see Request.Test); an inactive Persistent
// reports true and nil.
func (p *Persistent) Test() (bool, error) {
	if err := p.usable("Test"); err != nil {
		return false, err
	}
	if p.req == nil {
		return true, nil
	}
	done, err := p.req.Test()
	if done {
		p.req = nil
	}
	return done, err
}

// Active reports whether a start is in flight.
func (p *Persistent) Active() bool { return p != nil && p.req != nil }

// Free releases the Persistent (MPI_Request_free); it must not be
// active (ErrInvalid). Free is idempotent.
func (p *Persistent) Free() error {
	if p == nil {
		return fmt.Errorf("collectives: Free of a nil persistent collective: %w", ErrInvalid)
	}
	if p.req != nil {
		return fmt.Errorf("collectives: %s Free: a start has not completed: %w", p.id, ErrInvalid)
	}
	p.freed = true
	return nil
}

func (p *Persistent) usable(op string) error {
	if p == nil {
		return fmt.Errorf("collectives: %s on a nil persistent collective: %w", op, ErrInvalid)
	}
	if p.freed {
		return fmt.Errorf("collectives: %s %s after Free: %w", p.id, op, ErrInvalid)
	}
	return nil
}

// BarrierInit binds a Barrier.
func BarrierInit(c *Coll) (*Persistent, error) {
	p, err := persistent(c, callBarrier, func(cl *Coll) error { return Barrier(bg, cl) })
	if err == nil {
		p.hybrid = true
	}
	return p, err
}

// BcastInit binds a Bcast of buf from root.
func BcastInit[T any](c *Coll, buf []T, root int) (*Persistent, error) {
	p, err := persistent(c, callBcast, func(cl *Coll) error { return Bcast(bg, cl, buf, root) })
	if err == nil {
		p.hybrid = hybridRooted(buf)
	}
	return p, err
}

// ReduceInit binds a Reduce of send into root's recv.
func ReduceInit[T any](c *Coll, send, recv []T, op Op[T], root int) (*Persistent, error) {
	p, err := persistent(c, callReduce, func(cl *Coll) error { return Reduce(bg, cl, send, recv, op, root) })
	if err == nil {
		p.hybrid = hybridReduce(c, op.commutative) && hybridRooted(reduceData(send, recv))
	}
	return p, err
}

// AllreduceInit binds an Allreduce of send into recv (send nil: in place).
func AllreduceInit[T any](c *Coll, send, recv []T, op Op[T]) (*Persistent, error) {
	p, err := persistent(c, callAllreduce, func(cl *Coll) error { return Allreduce(bg, cl, send, recv, op) })
	if err == nil {
		p.hybrid = hybridReduce(c, op.commutative)
	}
	return p, err
}

// ReduceScatterBlockInit binds a ReduceScatterBlock.
func ReduceScatterBlockInit[T any](c *Coll, send, recv []T, op Op[T]) (*Persistent, error) {
	return persistent(c, callReduceScatterBlock, func(cl *Coll) error { return ReduceScatterBlock(bg, cl, send, recv, op) })
}

// ScanInit binds a Scan.
func ScanInit[T any](c *Coll, send, recv []T, op Op[T]) (*Persistent, error) {
	return persistent(c, callScan, func(cl *Coll) error { return Scan(bg, cl, send, recv, op) })
}

// GatherInit binds a Gather to root.
func GatherInit[T any](c *Coll, send, recv []T, root int) (*Persistent, error) {
	return persistent(c, callGather, func(cl *Coll) error { return Gather(bg, cl, send, recv, root) })
}

// ScatterInit binds a Scatter from root.
func ScatterInit[T any](c *Coll, send, recv []T, root int) (*Persistent, error) {
	return persistent(c, callScatter, func(cl *Coll) error { return Scatter(bg, cl, send, recv, root) })
}

// AllgatherInit binds an Allgather.
func AllgatherInit[T any](c *Coll, send, recv []T) (*Persistent, error) {
	return persistent(c, callAllgather, func(cl *Coll) error { return Allgather(bg, cl, send, recv) })
}

// AlltoallInit binds an Alltoall.
func AlltoallInit[T any](c *Coll, send, recv []T) (*Persistent, error) {
	return persistent(c, callAlltoall, func(cl *Coll) error { return Alltoall(bg, cl, send, recv) })
}

// NeighborAlltoallInit binds a NeighborAlltoall over topology t.
func NeighborAlltoallInit[T any](c *Coll, t endpoint.Topology, send, recv []T) (*Persistent, error) {
	return persistent(c, callNeighborAlltoall, func(cl *Coll) error { return NeighborAlltoall(bg, cl, t, send, recv) })
}

// NeighborAlltoallwInit binds a NeighborAlltoallw over topology t: a halo
// exchange named once and started every iteration.
func NeighborAlltoallwInit(c *Coll, t endpoint.Topology, send []byte, scounts, sdispls []int, stypes []*ddt.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*ddt.Type) (*Persistent, error) {
	return persistent(c, callNeighborAlltoallw, func(cl *Coll) error {
		return NeighborAlltoallw(bg, cl, t, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes)
	})
}
