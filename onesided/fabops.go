package onesided

import "github.com/weft-hpc/weft/fabric"

// The operation tracker of the libfabric path: a slot table. An
// operation with a completion of its own takes a slot; the context
// libfabric carries for it is the slot's handle (index + 1; 0 is
// untracked, for injected operations). Slots are reused through a free
// list, so tracking an operation neither allocates nor touches a map
// once the table has grown to the window's largest number of operations
// in flight.

// opHandle names a tracked operation: its slot index + 1, and the
// context its completion carries. 0 names none.
type opHandle = uint64

// untracked is the context of an operation with no completion
// (injected): the table never hands it out.
const untracked opHandle = 0

type opState uint8

const (
	opFree opState = iota
	opLive         // issued, completion not yet handled
	opDone         // completed, held for its owner (see opTable.hold)
)

// pendingOp is one slot of the table.
type pendingOp struct {
	state   opState
	held    bool       // on completion keep the slot (and scratch) for the owner
	target  int32      // rank, or -1
	scratch int32      // scratch slot to free, or -1
	mr      *fabric.MR // registration to release, or nil
	copyTo  []byte     // Get bounce: copy the scratch bytes here on completion
	seq     uint64     // issue number (issued/waitIssued)
	err     error      // the completion's error (held operations)
}

// opTable is the tracker: slots, their free list, and counts.
type opTable struct {
	ops       []pendingOp
	free      []int32 // free slot indices
	live      int     // operations not yet completed
	perTarget []int   // live operations per target
	seq       uint64  // operations issued so far
}

func newOpTable(size int) opTable {
	return opTable{perTarget: make([]int, size)}
}

// track takes a slot for an operation to target (or -1) that releases
// scratch slot scratch (or -1) and mr (or nil) when it completes, and
// returns its handle.
func (t *opTable) track(target, scratch int, mr *fabric.MR) opHandle {
	var i int32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		t.ops = append(t.ops, pendingOp{})
		i = int32(len(t.ops) - 1)
	}
	t.seq++
	t.ops[i] = pendingOp{state: opLive, target: int32(target), scratch: int32(scratch), mr: mr, seq: t.seq}
	t.live++
	if target >= 0 {
		t.perTarget[target]++
	}
	return opHandle(i) + 1
}

// op returns the slot h names, or nil for untracked or a handle outside
// the table.
func (t *opTable) op(h opHandle) *pendingOp {
	if h == untracked || h > uint64(len(t.ops)) {
		return nil
	}
	return &t.ops[h-1]
}

// hold makes the live operation h keep its slot and scratch slot after
// its completion, until release: its owner reads done, err and the
// scratch bytes first.
func (t *opTable) hold(h opHandle) { t.ops[h-1].held = true }

// done reports whether h has completed (a held operation).
func (t *opTable) done(h opHandle) bool { return t.ops[h-1].state == opDone }

// freeOp returns slot i of the table, and its scratch slot, to their
// free lists.
func (f *fabPath) freeOp(i int) {
	o := &f.pend.ops[i]
	if o.scratch >= slotCount { // a chunk buffer (fabtyped.go)
		f.unrefChunk(int(o.scratch)-slotCount, o.err)
	} else if o.scratch >= 0 {
		f.freeSlots = append(f.freeSlots, int(o.scratch))
	}
	*o = pendingOp{}
	f.pend.free = append(f.pend.free, int32(i))
}

// complete handles h's completion with err: it releases the
// registration, copies a Get bounce and, unless the operation is held,
// frees the slot and its scratch. It reports whether h was live (not
// untracked, not already completed).
func (f *fabPath) complete(h opHandle, err error) bool {
	t := &f.pend
	o := t.op(h)
	if o == nil || o.state != opLive {
		return false
	}
	t.live--
	if o.target >= 0 {
		t.perTarget[o.target]--
	}
	if o.copyTo != nil && o.scratch >= 0 && o.scratch < slotCount && err == nil {
		copy(o.copyTo, f.scratch.Bytes()[int(o.scratch)*slotSize:])
	}
	o.copyTo = nil
	if o.mr != nil {
		f.unreg(o.mr)
		o.mr = nil
	}
	o.err = err
	if o.held {
		o.state = opDone
		return true
	}
	f.freeOp(int(h - 1))
	return true
}

// release frees a held operation once its owner is done with it: at
// once when it has completed, else when its completion arrives.
func (f *fabPath) release(h opHandle) {
	o := f.pend.op(h)
	if o == nil {
		return
	}
	o.held = false
	if o.state == opDone {
		f.freeOp(int(h - 1))
	}
}

// drop ends h without a completion (its post failed): completed with
// err and freed, held or not.
func (f *fabPath) drop(h opHandle, err error) {
	if o := f.pend.op(h); o != nil && o.state == opLive {
		o.held = false
	}
	f.complete(h, err)
}

// issuedBefore reports whether an operation numbered ≤ n is still live.
func (t *opTable) issuedBefore(n uint64) bool {
	if t.live == 0 {
		return false
	}
	for i := range t.ops {
		if o := &t.ops[i]; o.state == opLive && o.seq <= n {
			return true
		}
	}
	return false
}
