package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
)

// Close order among siblings: endpoints before the memory regions they may
// use, before the CQs, AVs and counters they are bound to.
const (
	orderEP = iota
	orderMem
	orderQueue
	orderDomain
)

// obj is the lifetime bookkeeping shared by every libfabric object: an
// idempotent, locked Close that closes children first, and leak tracking.
type obj struct {
	mu      sync.Mutex
	closed  atomic.Bool
	kind    string
	fid     uintptr // C fid; 0 for pure-Go containers (Buffer)
	order   int
	parent  *obj
	kids    map[*obj]struct{}
	onClose func() error // runs after the fid is closed
	fast    *fastStack   // CQs and endpoints: see SetFastCall
}

func (o *obj) init(kind string, fid uintptr, order int) {
	o.kind, o.fid, o.order = kind, fid, order
	track(kind, 1)
}

// adopt registers child under o; it fails when o is closed.
func (o *obj) adopt(child *obj) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed.Load() {
		return fmt.Errorf("fabric: %s: %w", o.kind, ErrClosed)
	}
	if o.kids == nil {
		o.kids = map[*obj]struct{}{}
	}
	o.kids[child] = struct{}{}
	child.parent = o
	return nil
}

// close closes children first, then the fid. It is idempotent. If fi_close
// fails the object stays open (so a parent's Close can retry) and the error
// is returned.
func (o *obj) close() error {
	o.mu.Lock()
	if o.closed.Load() {
		o.mu.Unlock()
		return nil
	}
	kids := make([]*obj, 0, len(o.kids))
	for k := range o.kids {
		kids = append(kids, k)
	}
	o.mu.Unlock()
	sort.SliceStable(kids, func(i, j int) bool { return kids[i].order < kids[j].order })
	var errs []error
	for _, k := range kids {
		if err := k.close(); err != nil {
			errs = append(errs, err)
		}
	}
	o.mu.Lock()
	if o.closed.Load() {
		o.mu.Unlock()
		return errors.Join(errs...)
	}
	o.closed.Store(true)
	o.fast.shut() // a fast call in flight ends before the fid closes; later ones use cgo
	if o.fid != 0 {
		if ret := C.weft_close(C.uintptr_t(o.fid)); ret != 0 {
			o.closed.Store(false)
			o.mu.Unlock()
			errs = append(errs, fmt.Errorf("fabric: close %s: %w", o.kind, mkErr("fi_close", int(ret))))
			return errors.Join(errs...)
		}
	}
	o.fast.free()
	o.mu.Unlock()
	if o.onClose != nil {
		if err := o.onClose(); err != nil {
			errs = append(errs, err)
		}
	}
	track(o.kind, -1)
	if p := o.parent; p != nil {
		p.mu.Lock()
		delete(p.kids, o)
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}

// backstop closes o when the Go object p that owns it becomes unreachable
// without having been closed (a leak): a log line, then the normal Close.
// Explicit Close is still required for deterministic release.
func backstop[T any](p *T, o *obj) {
	runtime.AddCleanup(p, func(o *obj) {
		if !o.closed.Load() {
			log.Warn("closing a libfabric object that became unreachable without Close", "kind", o.kind)
			_ = o.close()
		}
	}, o)
}

// gone reports whether a handle's object is missing (a nil handle, or a
// zero one this package did not make) or closed: calls on it fail instead
// of dereferencing nil.
func gone(o *obj) bool { return o == nil || o.closed.Load() }

// handle returns the object behind a handle, nil for a nil handle.
func (f *Fabric) handle() *obj {
	if f == nil {
		return nil
	}
	return f.obj
}

func (d *Domain) handle() *obj {
	if d == nil {
		return nil
	}
	return d.obj
}

func (e *Endpoint) handle() *obj {
	if e == nil {
		return nil
	}
	return e.obj
}

func (c *CQ) handle() *obj {
	if c == nil {
		return nil
	}
	return c.obj
}

func (a *AV) handle() *obj {
	if a == nil {
		return nil
	}
	return a.obj
}

func (c *Counter) handle() *obj {
	if c == nil {
		return nil
	}
	return c.obj
}
