package onesided

import (
	"context"
	"io"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/progress"
)

// guardedPath is a window's libfabric path as the window sees it: every
// call counts itself in a progress.Guard, so that a call blocked
// elsewhere in this process (an endpoint wait, another window's wait) can
// read this path's completion queue while the window is idle — which is
// what a peer's Get, Put or atomic on this rank needs from a provider
// with manual progress — without ever racing with the window's owner.
// Direct-store operations never come here.
type guardedPath struct {
	f   *fabPath
	g   progress.Guard
	src *progress.Source
	// ferr is an error a foreign poll met (remote CQ data that is no
	// signal, a failed operation): the window's next progress-driving
	// call returns it, as if it had read the completion itself.
	ferr error
}

// takeErr returns and clears the error of a foreign poll. Caller is inside.
func (p *guardedPath) takeErr() error {
	err := p.ferr
	p.ferr = nil
	return err
}

func guardPath(f *fabPath) *guardedPath {
	p := &guardedPath{f: f}
	p.src = progress.Register(p.pollForeign)
	return p
}

// pollForeign reads the path's completion queue once if nobody is using
// the window. It does not issue deferred signals (that may wait for a
// free scratch slot): the window's own next call does.
func (p *guardedPath) pollForeign() {
	if !p.g.TryForeign() {
		return
	}
	defer p.g.EndForeign()
	f := p.f
	if f.closedPaths || f.cq == nil {
		return
	}
	f.foreign = true
	if err := f.progress(); err != nil && p.ferr == nil {
		p.ferr = err
	}
	f.foreign = false
}

// netFab returns the libfabric path behind n, or nil.
func netFab(n netPath) *fabPath {
	switch p := n.(type) {
	case *guardedPath:
		return p.f
	case *fabPath:
		return p
	}
	return nil
}

func (p *guardedPath) put(target, off int, data []byte) error {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.put(target, off, data)
}

func (p *guardedPath) typedVec(target, offset int, segs []ddt.Segment, pieces [][]byte, get bool) error {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.typedVec(target, offset, segs, pieces, get)
}

func (p *guardedPath) typedChunks(ctx context.Context, target, offset int, segs []ddt.Segment, n int,
	pack chunkPack, unpack chunkUnpack) error {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.typedChunks(ctx, target, offset, segs, n, pack, unpack)
}

func (p *guardedPath) get(target, off int, dst []byte) error {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.get(target, off, dst)
}

func (p *guardedPath) putSignal(target, off int, data []byte, sigOff int, val uint64) error {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.putSignal(target, off, data, sigOff, val)
}

func (p *guardedPath) accumulate(target, off int, t AtomicType, o Op, data []byte) error {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.accumulate(target, off, t, o, data)
}

func (p *guardedPath) getAccumulate(target, off int, t AtomicType, o Op, data, result []byte) error {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.getAccumulate(target, off, t, o, data, result)
}

func (p *guardedPath) fetchOp(target, off int, t AtomicType, o Op, v uint64) (uint64, error) {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.fetchOp(target, off, t, o, v)
}

func (p *guardedPath) cas(target, off int, t AtomicType, cmp, swap uint64) (uint64, error) {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.cas(target, off, t, cmp, swap)
}

func (p *guardedPath) noCQSignals() {
	p.g.Enter()
	defer p.g.Exit()
	p.f.noCQSignals()
}

func (p *guardedPath) attach(buf []byte) (uint64, uint64, io.Closer, error) {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.attach(buf)
}

func (p *guardedPath) ctrlXor(target, off int, bits uint64) error {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.ctrlXor(target, off, bits)
}

func (p *guardedPath) ctrlCAS(target, off int, cmp, swap uint64) (uint64, error) {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.ctrlCAS(target, off, cmp, swap)
}

func (p *guardedPath) flush(ctx context.Context, target int) error {
	p.g.Enter()
	defer p.g.Exit()
	if err := p.takeErr(); err != nil {
		return err
	}
	return p.f.flush(ctx, target)
}

func (p *guardedPath) flushLocal(ctx context.Context, target int) error {
	p.g.Enter()
	defer p.g.Exit()
	if err := p.takeErr(); err != nil {
		return err
	}
	return p.f.flushLocal(ctx, target)
}

func (p *guardedPath) issued() uint64 {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.issued()
}

func (p *guardedPath) issuedDone(n uint64) (bool, error) {
	p.g.Enter()
	defer p.g.Exit()
	if err := p.takeErr(); err != nil {
		return false, err
	}
	return p.f.issuedDone(n)
}

func (p *guardedPath) waitIssued(ctx context.Context, n uint64) error {
	p.g.Enter()
	defer p.g.Exit()
	if err := p.takeErr(); err != nil {
		return err
	}
	return p.f.waitIssued(ctx, n)
}

func (p *guardedPath) progress() error {
	p.g.Enter()
	defer p.g.Exit()
	if err := p.takeErr(); err != nil {
		return err
	}
	return p.f.progress()
}

func (p *guardedPath) waitWord(w *uint64, want uint64, spins int) (bool, error) {
	p.g.Enter()
	defer p.g.Exit()
	if err := p.takeErr(); err != nil {
		return false, err
	}
	return p.f.waitWord(w, want, spins)
}

func (p *guardedPath) ctrlSignal(target, off int, val uint64) error {
	p.g.Enter()
	defer p.g.Exit()
	return p.f.ctrlSignal(target, off, val)
}

func (p *guardedPath) setCallCtx(ctx context.Context) context.Context { return p.f.setCallCtx(ctx) }
func (p *guardedPath) ctrlMem() []byte                                { return p.f.ctrlMem() }
func (p *guardedPath) ordering() SignalOrdering                       { return p.f.ordering() }
func (p *guardedPath) provider() string                               { return p.f.provider() }

// close unregisters the path first: a foreign poll that began earlier
// still holds the guard, and close waits for it in Enter.
func (p *guardedPath) close() error {
	progress.Unregister(p.src)
	p.g.Enter()
	defer p.g.Exit()
	return p.f.close()
}
