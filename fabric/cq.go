package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// Completion is one successful completion (fi_cq_tagged_entry without the
// buffer pointer). Its layout matches the C struct weft_comp, so CQ.Read
// fills a caller's slice directly in C.
type Completion struct {
	Context uint64 // the ctx handle passed to the operation
	Flags   uint64 // CompSend, CompRecv, CompTagged, CompRMA, CompRemoteCQData, ...
	Len     int    // bytes received (receives)
	Data    uint64 // remote CQ data when Flags has CompRemoteCQData
	Tag     uint64 // tag of a tagged receive
}

// Compile-time check that Completion is exactly five 64-bit words.
var (
	_ [unsafe.Sizeof(Completion{}) - 40]byte
	_ [40 - unsafe.Sizeof(Completion{})]byte
)

// cqErrRaw mirrors struct weft_cqerr.
type cqErrRaw struct {
	Ctx, Flags, Len, Olen, Data, Tag uint64
	Err, ProvErrno                   int64
	Text                             [256]byte
}

// CQ is a completion queue (fi_cq, FI_CQ_FORMAT_TAGGED, no wait object).
// One goroutine at a time should read a CQ.
type CQ struct {
	*obj
	dom   *Domain
	yield pollYield // see SetPollYield
	pace  C.int     // clock reads between empty polls (WithPollPace)
	// napHook replaces Poll's sleep between bursts (tests); nil: nanosleep.
	napHook func(time.Duration)
}

// OpenCQ opens a completion queue with room for size entries (0 = provider
// default).
func (d *Domain) OpenCQ(size int) (*CQ, error) {
	if size < 0 {
		return nil, fmt.Errorf("fabric: OpenCQ size %d: %w", size, ErrInvalid)
	}
	if gone(d.handle()) {
		return nil, fmt.Errorf("fabric: OpenCQ: %w", ErrClosed)
	}
	var fid C.uintptr_t
	if ret := C.weft_cq_open(C.uintptr_t(d.fid), C.size_t(size), &fid); ret != 0 {
		return nil, fmt.Errorf("fabric: open CQ: %w", mkErr("fi_cq_open", int(ret)))
	}
	cq := &CQ{obj: new(obj), dom: d, pace: C.int(d.cfg.pace)}
	cq.yield.every, cq.yield.hook = int64(d.cfg.yield), d.cfg.yieldHook
	cq.napHook = d.cfg.napHook
	cq.fast = newFastStack(&d.cfg, d.info.Provider)
	cq.init("cq", uintptr(fid), orderQueue)
	if err := d.adopt(cq.obj); err != nil {
		cq.close()
		return nil, err
	}
	backstop(cq, cq.obj)
	return cq, nil
}

// maxBatch is the most completions one Read returns.
const maxBatch = 64

// Read reads up to len(out) (at most 64) completions in one cgo call and
// returns how many it stored; 0, nil when the queue is empty. With an empty
// out it only drives progress (fi_cq_read of zero entries) and returns 0,
// nil, leaving completions and errors queued. Reading a CQ
// drives progress for manual-progress providers (shm, ofi_rxm). When the
// next entry is an error completion Read returns 0 and a *CQError, whose Err
// matches ErrTruncated, ErrCanceled, ... with errors.Is.
func (c *CQ) Read(out []Completion) (int, error) {
	return c.read(out, 1)
}

// ReadSpin is Read that, in C, retries an empty queue up to spins times
// before returning 0. It saves cgo crossings in tight polling loops.
func (c *CQ) ReadSpin(out []Completion, spins int) (int, error) {
	return c.read(out, spins)
}

func (c *CQ) read(out []Completion, spins int) (int, error) {
	if gone(c.handle()) {
		return 0, closeds[opCQRead]
	}
	if len(out) == 0 {
		spins = 1 // only drive progress
	}
	var ret C.ssize_t
	if f := c.enter(spins); f != nil {
		f.fastOut(c.fid, out, spins)
		ret = C.ssize_t(f.call(C.WEFT_FAST_CQ_READ))
		runtime.KeepAlive(out)
	} else {
		comp, cnt := compArg(out)
		ret = C.weft_cq_read(C.uintptr_t(c.fid), comp, cnt, spinArg(spins), c.pace)
	}
	if len(out) == 0 {
		return 0, nil
	}
	if ret > 0 {
		return int(ret), nil
	}
	if ret == -C.FI_EAGAIN {
		return 0, nil
	}
	return 0, c.readFail(int(-ret))
}

// compArg is out as the C completion array of at most maxBatch entries
// (nil for an empty out).
func compArg(out []Completion) (*C.struct_weft_comp, C.size_t) {
	if len(out) == 0 {
		return nil, 0
	}
	return (*C.struct_weft_comp)(unsafe.Pointer(&out[0])), C.size_t(min(len(out), maxBatch))
}

// spinArg is a spin count for C, at least 1.
func spinArg(spins int) C.int { return C.int(max(spins, 1)) }

// readFail converts a failed fi_cq_read (code is a positive libfabric
// errno): an error completion is read and returned as a *CQError.
func (c *CQ) readFail(code int) error {
	if code == int(C.FI_EAVAIL) {
		return c.readErr()
	}
	return mkErr("fi_cq_read", -code)
}

func (c *CQ) readErr() error {
	var raw cqErrRaw
	ret := C.weft_cq_readerr(C.uintptr_t(c.fid), (*C.struct_weft_cqerr)(unsafe.Pointer(&raw)))
	if ret == -C.FI_EAGAIN {
		return nil // another reader took it
	}
	if ret < 0 {
		return mkErr("fi_cq_readerr", int(ret))
	}
	e := raw.Err
	if e < 0 { // shm in 1.17 stores a negative code
		e = -e
	}
	no := syscall.Errno(e)
	text := C.GoString((*C.char)(unsafe.Pointer(&raw.Text[0])))
	return &CQError{
		Context:   raw.Ctx,
		Flags:     raw.Flags,
		Err:       &Error{Op: "fi_cq_readerr", Errno: no, Text: strerror(int(no))},
		ProvErrno: int(raw.ProvErrno),
		Text:      text,
		Len:       int(raw.Len),
		Olen:      int(raw.Olen),
		Tag:       raw.Tag,
		Data:      raw.Data,
	}
}

// Poll reads completions like Read but waits until at least one completion
// or error is available, or ctx is done (then it returns ctx.Err()). For
// the first 100 µs of the wait it busy-polls in C in short bursts and
// yields to other goroutines between them. After that it sleeps between
// bursts, 20 µs at first and twice as long each time up to 1 ms, so that
// a process waiting for a peer leaves the processor to that peer (and to
// the launcher) when a node runs more processes than it has cores. A
// completion that arrives during a sleep is seen up to that sleep's length
// late: loops that want the lowest latency poll with Read, ReadSpin or
// WaitWord instead.
func (c *CQ) Poll(ctx context.Context, out []Completion) (int, error) {
	var since time.Time
	var nap time.Duration
	for {
		n, err := c.read(out, 256)
		if n > 0 || err != nil {
			return n, err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		switch {
		case since.IsZero():
			since = time.Now()
		case nap > 0 || time.Since(since) >= pollBusy:
			nap = min(max(2*nap, pollNapMin), pollNapMax)
			d := nap
			if dl, ok := ctx.Deadline(); ok {
				d = min(d, time.Until(dl))
			}
			if d > 0 {
				c.sleep(d)
			}
			continue
		}
		runtime.Gosched()
	}
}

// How CQ.Poll waits: it spins for pollBusy, then sleeps between bursts,
// pollNapMin first, doubling up to pollNapMax (docs/perf/startup.md).
const (
	pollBusy   = 100 * time.Microsecond
	pollNapMin = 20 * time.Microsecond
	pollNapMax = time.Millisecond
)

// sleep is CQ.Poll's sleep between bursts: the domain's test hook, or a
// nanosleep of the calling thread. time.Sleep would park only the
// goroutine, but when nothing else is runnable the runtime rounds a timer
// under a millisecond up to one.
func (c *CQ) sleep(d time.Duration) {
	if c.napHook != nil {
		c.napHook(d)
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // EINTR: a shorter sleep is harmless
}

// Close closes the CQ. Endpoints bound to it must be closed first (closing
// the Domain does that). It is idempotent.
func (c *CQ) Close() error {
	if c == nil {
		return nil
	}
	return c.close()
}

// paceTime is how long the pacing of rounds empty polls at pace takes:
// the loop the spinning calls run between polls, without the polls.
func paceTime(rounds, pace int) time.Duration {
	t0 := time.Now()
	C.weft_pace_rounds(C.int(rounds), C.int(pace))
	return time.Since(t0)
}
