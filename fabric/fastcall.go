package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/weft-hpc/weft/internal/ccall"
	"github.com/weft-hpc/weft/internal/settings"
)

// FastCall selects how the polling and batch calls enter C: CQ.Read,
// CQ.ReadSpin, CQ.WaitWord, CQ.ReadSignals, CQ.WaitWordSignals,
// Endpoint.PostBatch and Endpoint.PostAndRead. See SetFastCall.
type FastCall int

const (
	// FastCallAuto uses fast calls on providers whose polling and posting
	// never block in the kernel on the small-message path: shm.
	FastCallAuto FastCall = iota
	// FastCallOn uses fast calls on every provider.
	FastCallOn
	// FastCallOff always uses ordinary cgo calls.
	FastCallOff
)

// String returns "auto", "on" or "off".
func (m FastCall) String() string {
	switch m {
	case FastCallAuto:
		return "auto"
	case FastCallOn:
		return "on"
	case FastCallOff:
		return "off"
	}
	return fmt.Sprintf("FastCall(%d)", int(m))
}

// fastMode is the process-wide default FastCall, read when a domain is
// opened (defaultDomainConfig).
var fastMode atomic.Int32

// The initial mode is WEFT_FASTCALL's; a bad value leaves auto and makes
// GetInfo fail (settings.Check).
func init() {
	v, _, _ := settings.Str("WEFT_FASTCALL")
	fastMode.Store(int32(parseFastCall(v)))
}

// parseFastCall maps the canonical WEFT_FASTCALL words to a mode.
func parseFastCall(v string) FastCall {
	switch v {
	case "on":
		return FastCallOn
	case "off":
		return FastCallOff
	}
	return FastCallAuto
}

// SetFastCall sets the process-wide default of how CQs and endpoints enter
// C on their hot paths, and returns the previous default. It applies to
// domains opened from now on that do not set their own (WithFastCall);
// objects already open keep their mode. The initial default is
// FastCallAuto, or the environment variable WEFT_FASTCALL (auto, on, off).
// A mode out of range sets FastCallAuto.
//
// A fast call runs the C shim on a stack that belongs to the CQ or
// endpoint, without the cgo transition of the Go scheduler (package
// internal/ccall), which saves ~30 ns per call, about a tenth of an 8-byte
// shm message. While it runs, the goroutine keeps its processor and cannot
// be preempted, so a garbage-collection pause waits for it: only calls with
// at most FastSpinMax polling rounds take the fast path (about 150 µs of
// empty reads on shm), and only one goroutine at a time per CQ or endpoint
// (a concurrent call takes the cgo path). FastCallOn also uses it for
// providers whose progress may block in the kernel (tcp, sockets, verbs),
// where a blocked call holds the processor; auto leaves those on cgo.
func SetFastCall(m FastCall) FastCall {
	if m < FastCallAuto || m > FastCallOff {
		m = FastCallAuto
	}
	return FastCall(fastMode.Swap(int32(m)))
}

// FastSpinMax is the largest spins argument that takes the fast path; calls
// that may spin longer use cgo, so the goroutine can be preempted.
const FastSpinMax = 4096

// fastStackSize is each C stack's size, guard page included. libfabric's
// polling and posting paths use a few KiB.
const fastStackSize = 256 << 10

// fastFn is weft_fast_call.
var fastFn = uintptr(C.weft_fast_fn())

// Fast stack states.
const (
	fastFree = iota
	fastBusy
	fastShut
)

// fastStack is the C stack of one CQ or endpoint and the flag that gives
// it to one call at a time.
type fastStack struct {
	// args is the argument block of the call in flight, filled by the
	// holder field by field (fastOps, fastOut, ...) and reused: building
	// a fresh block per call cost a copy that stalled on store
	// forwarding. Fields a call does not set keep stale values, which its
	// shim does not read. First, so that it starts the object's cache line.
	args  C.struct_weft_fast
	state atomic.Uint32
	used  uint64 // fast calls made; tests read it
	// Spans found by opsRegistered, valid while the domain's span
	// generation is spanGen; used by the holder only.
	spans    [fastSpanCache]regSpan
	spanGen  uint64
	spanNext uint32
	base     uintptr
	top      uintptr // 16-byte aligned
}

// newFastStack maps a stack when the domain configuration cfg turns fast
// calls on for prov; nil otherwise or when the mapping fails (the object
// then uses cgo). The argument block's pace is set here once: the spinning
// shims read it from the block, so a call pays nothing for it.
func newFastStack(cfg *domainConfig, prov string) *fastStack {
	if !fastWanted(cfg.fast, prov, runtime.Version()) {
		return nil
	}
	b := uintptr(C.weft_stack_alloc(fastStackSize))
	if b == 0 {
		log.Debug("no C stack for fast calls; using cgo")
		return nil
	}
	f := &fastStack{base: b, top: (b + fastStackSize) &^ 15}
	f.args.pace = C.int64_t(cfg.pace)
	return f
}

// fastWanted decides whether an object of provider prov gets a fast-call
// stack under mode m, in a program built by Go release goVersion
// (runtime.Version()). auto asks for shm and for a Go release whose
// runtime the trampoline was verified against (ccall.Verified); on only
// needs the trampoline.
func fastWanted(m FastCall, prov, goVersion string) bool {
	switch {
	case !ccall.Supported || m == FastCallOff:
		return false
	case m == FastCallOn:
		return true
	case prov != "shm":
		return false
	case !ccall.Verified(goVersion):
		unverifiedOnce.Do(func() {
			log.Info("fast calls off: the trampoline is not verified on this Go release (WEFT_FASTCALL=on forces them)", "go", goVersion)
		})
		return false
	}
	return true
}

var unverifiedOnce sync.Once

// enter starts one polling call on c: it returns c's stack, held, when
// the call takes the fast path, else nil. Only cgo calls count for the poll
// yield (WithPollYield): a goroutine in a fast call is running Go code as
// far as the scheduler knows, so the runtime's own preemption gives it a
// new slice every 10 ms and its processor is never taken away.
func (c *CQ) enter(spins int) *fastStack {
	if f := c.fast; f.acquire(spins) {
		return f
	}
	c.yield.tick()
	return nil
}

// acquire takes the stack for one call; false when it is in use or shut.
func (f *fastStack) acquire(spins int) bool {
	return f != nil && spins <= FastSpinMax && f.state.CompareAndSwap(fastFree, fastBusy)
}

// holdIf keeps the held stack when ok and gives it back otherwise; it
// returns ok.
func (f *fastStack) holdIf(ok bool) bool {
	if !ok {
		f.state.Store(fastFree)
	}
	return ok
}

// call runs weft_fast_call(&f.args) with the given kind on the stack and
// gives the stack back. The caller holds it (acquire), filled the fields
// the kind reads, and keeps the Go memory they name alive.
func (f *fastStack) call(kind C.int64_t) int64 {
	r := f.run(kind)
	f.state.Store(fastFree)
	return r
}

// run is call without giving the stack back, for a caller that reads
// results from f.args first.
func (f *fastStack) run(kind C.int64_t) int64 {
	f.args.kind = kind
	r := ccall.Call(fastFn, uintptr(unsafe.Pointer(&f.args)), f.top)
	f.used++
	return r
}

// shut waits for a call in flight to end and keeps later calls on cgo.
func (f *fastStack) shut() {
	if f == nil {
		return
	}
	for !f.state.CompareAndSwap(fastFree, fastShut) {
		if f.state.Load() == fastShut {
			return
		}
		runtime.Gosched()
	}
}

// free unmaps a shut stack.
func (f *fastStack) free() {
	if f == nil || f.base == 0 {
		return
	}
	C.weft_stack_free(C.uintptr_t(f.base), fastStackSize)
	f.base, f.top = 0, 0
}

// fastOps fills the ops and ep fields of the held stack's argument block.
// The ops pointer travels as an integer: the caller keeps ops alive
// (runtime.KeepAlive) and, when they are on its stack, the stack cannot
// move while the fast call runs.
func (f *fastStack) fastOps(ep uintptr, ops []Op) {
	a := &f.args
	a.ep = C.uintptr_t(ep)
	a.ops = C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(ops))))
	a.n = C.uint64_t(len(ops))
}

// fastOut fills the cq, out, count and spins fields of the held stack's
// argument block; the caller keeps out alive.
func (f *fastStack) fastOut(cq uintptr, out []Completion, spins int) {
	a := &f.args
	a.cq = C.uintptr_t(cq)
	a.out = C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(out))))
	a.count = C.uint64_t(min(len(out), maxBatch))
	a.spins = C.int64_t(max(spins, 1))
}

// regSpans is the set of a domain's live registrations (Domain.Alloc
// buffers and registered, pinned Go memory): the memory an Op may name on
// the fast path, where no cgo pointer check runs. Readers take a snapshot;
// gen changes before any span goes away, so a cache of spans stamped with
// gen is valid while gen is unchanged.
type regSpans struct {
	mu   sync.Mutex
	list atomic.Pointer[[]regSpan] // sorted by lo; a multiset
	gen  atomic.Uint64
}

// regSpan is one registration, [lo, hi).
type regSpan struct{ lo, hi uintptr }

// add inserts [lo, lo+n).
func (s *regSpans) add(lo uintptr, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []regSpan
	if p := s.list.Load(); p != nil {
		old = *p
	}
	i, _ := slices.BinarySearchFunc(old, lo, func(r regSpan, lo uintptr) int { return cmp.Compare(r.lo, lo) })
	l := slices.Insert(slices.Clone(old), i, regSpan{lo, lo + uintptr(n)})
	s.list.Store(&l)
}

// remove drops one span [lo, lo+n); gen changes first.
func (s *regSpans) remove(lo uintptr, n int) {
	s.gen.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.list.Load()
	if p == nil {
		return
	}
	if i := slices.Index(*p, regSpan{lo, lo + uintptr(n)}); i >= 0 {
		l := slices.Delete(slices.Clone(*p), i, i+1)
		s.list.Store(&l)
	}
}

// find returns a span that contains [p, p+n).
func (s *regSpans) find(p, n uintptr) (regSpan, bool) {
	l := s.list.Load()
	if l == nil {
		return regSpan{}, false
	}
	for _, r := range *l {
		if r.lo > p {
			break
		}
		if p+n <= r.hi && p+n >= p {
			return r, true
		}
	}
	return regSpan{}, false
}

// fastSpanCache is how many spans a fast stack remembers.
const fastSpanCache = 4

// opsRegistered reports whether every op's buffer lies inside a live
// registration of d, so that the ops may go to C without the cgo pointer
// check: that memory is C memory or pinned. Ops with no buffer pass. The
// holder of f calls it; f remembers the last spans found.
func (f *fastStack) opsRegistered(d *Domain, ops []Op) bool {
	if gen := d.spans.gen.Load(); f.spanGen != gen {
		f.spans, f.spanGen = [fastSpanCache]regSpan{}, gen
	}
next:
	for i := range ops {
		o := &ops[i]
		if o.Len == 0 {
			continue
		}
		p := uintptr(o.Buf)
		for _, r := range f.spans {
			if p >= r.lo && p+o.Len <= r.hi && p+o.Len >= p {
				continue next
			}
		}
		r, ok := d.spans.find(p, o.Len)
		if !ok {
			return false
		}
		f.spans[f.spanNext%fastSpanCache] = r
		f.spanNext++
	}
	return true
}

// postFast posts op as a fast call when the endpoint has a C stack, the
// stack is free and op's buffer lies in a live registration of the domain
// (PostBatch's rule: no cgo pointer check runs here), or op is an inject,
// whose bytes C copies before the call returns (see injectKind). ok is
// false when it did not, and the caller makes its ordinary cgo call;
// otherwise ret is libfabric's return value.
func (e *Endpoint) postFast(op Op) (ret C.ssize_t, ok bool) {
	f := e.fast
	ops := unsafe.Slice(&op, 1)
	if !f.acquire(0) || !f.holdIf(injectKind(op.Kind) || f.opsRegistered(e.dom, ops)) {
		return 0, false
	}
	f.fastOps(e.fid, ops)
	return C.ssize_t(f.call(C.WEFT_FAST_POST_ONE)), true
}

// injectKind reports whether k copies its buffer before the call returns
// and keeps no pointer to it. A single such operation (Endpoint.Inject,
// TInjectData, InjectWrite, ...) may take the fast path from any memory:
// the heap does not move, the calling goroutine's stack cannot move while
// the call runs (TestCallUnderPreemptionAndGC), and C never holds the
// pointer afterwards, which is all cgo's pointer check guards against for
// a byte buffer. Batches keep the registration rule, because their cgo
// path, taken when the stack is busy, checks the pointers inside the []Op.
func injectKind(k OpKind) bool {
	switch k {
	case OpKindInject, OpKindInjectData, OpKindTInject, OpKindTInjectData, OpKindInjectWrite, OpKindInjectWriteData:
		return true
	}
	return false
}
