package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
)

// Counter is a completion counter (fi_cntr). Bind it to an endpoint with
// WithCounter when opening the endpoint.
type Counter struct {
	*obj
	dom  *Domain
	pace C.int // clock reads between empty polls of Wait (WithPollPace)
}

// OpenCounter opens a counter that counts completions.
func (d *Domain) OpenCounter() (*Counter, error) {
	if gone(d.handle()) {
		return nil, fmt.Errorf("fabric: OpenCounter: %w", ErrClosed)
	}
	var fid C.uintptr_t
	if ret := C.weft_cntr_open(C.uintptr_t(d.fid), &fid); ret != 0 {
		return nil, fmt.Errorf("fabric: open counter: %w", mkErr("fi_cntr_open", int(ret)))
	}
	c := &Counter{obj: new(obj), dom: d, pace: C.int(d.cfg.pace)}
	c.init("cntr", uintptr(fid), orderQueue)
	if err := d.adopt(c.obj); err != nil {
		c.close()
		return nil, err
	}
	backstop(c, c.obj)
	return c, nil
}

// Read returns the number of successful completions counted (and drives
// progress on manual-progress providers). It returns 0 on a closed counter.
func (c *Counter) Read() uint64 {
	if gone(c.handle()) {
		return 0
	}
	return uint64(C.weft_cntr_read(C.uintptr_t(c.fid)))
}

// ReadErr returns the number of failed operations counted.
func (c *Counter) ReadErr() uint64 {
	if gone(c.handle()) {
		return 0
	}
	return uint64(C.weft_cntr_readerr(C.uintptr_t(c.fid)))
}

// Add adds v to the counter.
func (c *Counter) Add(v uint64) error {
	if gone(c.handle()) {
		return fmt.Errorf("fabric: Counter.Add: %w", ErrClosed)
	}
	if ret := C.weft_cntr_add(C.uintptr_t(c.fid), C.uint64_t(v)); ret != 0 {
		return mkErr("fi_cntr_add", int(ret))
	}
	return nil
}

// Set sets the counter to v.
func (c *Counter) Set(v uint64) error {
	if gone(c.handle()) {
		return fmt.Errorf("fabric: Counter.Set: %w", ErrClosed)
	}
	if ret := C.weft_cntr_set(C.uintptr_t(c.fid), C.uint64_t(v)); ret != 0 {
		return mkErr("fi_cntr_set", int(ret))
	}
	return nil
}

// Wait polls until the counter reaches threshold or ctx is done. It
// returns the last value read.
func (c *Counter) Wait(ctx context.Context, threshold uint64) (uint64, error) {
	for {
		if gone(c.handle()) {
			return 0, fmt.Errorf("fabric: Counter.Wait: %w", ErrClosed)
		}
		v := uint64(C.weft_cntr_spin(C.uintptr_t(c.fid), C.uint64_t(threshold), 256, c.pace))
		if v >= threshold {
			return v, nil
		}
		if err := ctx.Err(); err != nil {
			return v, err
		}
		runtime.Gosched()
	}
}

// Close closes the counter; endpoints bound to it must be closed first.
func (c *Counter) Close() error {
	if c == nil {
		return nil
	}
	return c.close()
}
