package onesided

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/internal/testenv"
)

// TestDecideOrdering: forced orderings are kept where the provider gives
// them and refused with ErrNotSupported where not; auto picks CQ data,
// WAW, fence, delivery in that order of preference.
func TestDecideOrdering(t *testing.T) {
	waw := fabric.Info{Provider: "p", MsgOrder: fabric.OrderRMAWAW, CQDataSize: 8, DataProgress: fabric.ProgressManual}
	wawAuto := waw
	wawAuto.DataProgress = fabric.ProgressAuto
	noCQ := waw
	noCQ.CQDataSize = 4
	fence := fabric.Info{Provider: "p", Caps: fabric.CapFence}
	plain := fabric.Info{Provider: "p"}
	for _, c := range []struct {
		forced SignalOrdering
		info   fabric.Info
		want   SignalOrdering // 0 with err
		err    bool
	}{
		{OrderAuto, waw, OrderCQData, false},
		{OrderAuto, wawAuto, OrderWAW, false},
		{OrderAuto, noCQ, OrderWAW, false},
		{OrderAuto, fence, OrderFence, false},
		{OrderAuto, plain, OrderDelivery, false},
		{OrderWAW, waw, OrderWAW, false},
		{OrderWAW, fence, 0, true},
		{OrderFence, fence, OrderFence, false},
		{OrderFence, waw, 0, true},
		{OrderCQData, wawAuto, OrderCQData, false},
		{OrderCQData, noCQ, 0, true},
		{OrderCQData, plain, 0, true},
		{OrderDelivery, plain, OrderDelivery, false},
	} {
		got, err := decideOrdering(c.forced, &c.info)
		if c.err {
			if !errors.Is(err, ErrNotSupported) {
				t.Errorf("%v on %+v: %v, %v; want ErrNotSupported", c.forced, c.info, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v on %+v: %v, %v; want %v", c.forced, c.info, got, err, c.want)
		}
	}
}

func TestInjectLimit(t *testing.T) {
	info := &fabric.Info{InjectSize: 8192, MaxOrderWAWSize: -1}
	for _, c := range []struct {
		order  SignalOrdering
		wawMax int
		want   int
	}{
		{OrderWAW, -1, maxInject}, {OrderCQData, -1, maxInject}, {OrderWAW, 100, 100},
		{OrderFence, -1, -1}, {OrderDelivery, -1, -1},
	} {
		info.MaxOrderWAWSize = c.wawMax
		want := c.want
		if noInject {
			want = -1
		}
		if got := injectLimit(c.order, info); got != want {
			t.Errorf("injectLimit(%v, WAW max %d) = %d, want %d", c.order, c.wawMax, got, want)
		}
	}
}

func TestCanShareDomain(t *testing.T) {
	all := fabric.CapRMA | fabric.CapAtomic | fabric.CapRemoteWrite | fabric.CapRemoteRead
	for _, c := range []struct {
		caps fabric.Caps
		o    options
		want bool
	}{
		{all, options{}, true},
		{all &^ fabric.CapAtomic, options{}, false},
		{all, options{provider: "shm"}, false},
		{all, options{order: OrderFence}, false},
		{all | fabric.CapFence, options{order: OrderFence}, true},
	} {
		if got := canShareDomain(&fabric.Info{Caps: c.caps}, c.o); got != c.want {
			t.Errorf("canShareDomain(%v, %+v) = %v, want %v", c.caps, c.o, got, c.want)
		}
	}
}

// TestSignallerFor: the signaller each (ordering, CQ data) pair gets.
func TestSignallerFor(t *testing.T) {
	name := func(f signalFunc) uintptr { return reflect.ValueOf(f).Pointer() }
	for _, c := range []struct {
		order SignalOrdering
		cq    bool
		want  signalFunc
	}{
		{OrderCQData, true, (*fabPath).signalCQData},
		{OrderCQData, false, (*fabPath).signalWAW},
		{OrderWAW, false, (*fabPath).signalWAW},
		{OrderFence, false, (*fabPath).signalFence},
		{OrderDelivery, false, (*fabPath).signalDelivery},
	} {
		if name(signallerFor(c.order, c.cq)) != name(c.want) {
			t.Errorf("signallerFor(%v, %v) is not the expected signaller", c.order, c.cq)
		}
	}
}

// TestOpTable: handles are reused through the free list, held operations
// keep their slot until released, counts follow.
func TestOpTable(t *testing.T) {
	f := &fabPath{pend: newOpTable(2)}
	a := f.pend.track(0, -1, nil)
	b := f.pend.track(1, -1, nil)
	if a == untracked || b == untracked || a == b || f.pend.live != 2 || f.pend.perTarget[1] != 1 {
		t.Fatalf("handles %d %d, live %d", a, b, f.pend.live)
	}
	f.pend.hold(b)
	if !f.pend.issuedBefore(1) || f.pend.issuedBefore(0) {
		t.Fatal("issuedBefore")
	}
	if !f.complete(a, nil) || f.complete(a, nil) || f.complete(untracked, nil) || f.complete(99, nil) {
		t.Fatal("complete of a live, a done, an untracked or an unknown handle")
	}
	if c := f.pend.track(0, -1, nil); c != a {
		t.Fatalf("freed slot %d not reused (got %d)", a, c)
	} else {
		f.complete(c, nil)
	}
	f.complete(b, errors.New("x"))
	if !f.pend.done(b) || f.pend.op(b).err == nil || f.pend.live != 0 || f.pend.perTarget[1] != 0 {
		t.Fatal("held operation not kept after its completion")
	}
	if c := f.pend.track(0, -1, nil); c == b {
		t.Fatal("held slot reused before release")
	} else {
		f.complete(c, nil)
	}
	f.release(b)
	if f.pend.op(b).state != opFree || len(f.pend.ops) != 2 {
		t.Fatalf("released slot state %v, table of %d", f.pend.op(b).state, len(f.pend.ops))
	}
	// Released before completing: freed by the completion.
	d := f.pend.track(1, -1, nil)
	f.pend.hold(d)
	f.release(d)
	f.complete(d, nil)
	if f.pend.op(d).state != opFree {
		t.Fatal("abandoned held operation not freed by its completion")
	}
}

func fetchErr(_ uint64, err error) error { return err }

// TestNetPutFlushAllocs: a Put / PutSignal / Get / Flush / FetchAndOp loop on the libfabric
// path allocates nothing per operation, injected (WAW) or tracked
// (delivery ordering), from the region or from Go memory: the tracker is
// a slot table, contexts are integer handles, registration handles are
// reused. Under -race the loop runs but the count is not
// checked.
func TestNetPutFlushAllocs(t *testing.T) {
	for _, c := range []providerCase{{"shm", OrderWAW}, {"shm", OrderDelivery}, {"sockets", OrderFence}} {
		t.Run(c.name(), func(t *testing.T) {
			requireProvider(t, c.prov)
			runRanks(t, 1, func(ctx context.Context, g Group) (err error) {
				w, err := Allocate(ctx, g, 16384, c.opts()...)
				if errors.Is(err, ErrNotSupported) {
					t.Logf("not supported here: %v", err)
					return nil
				}
				if err != nil {
					return err
				}
				defer cleanup(ctx, &err, w.Free)
				f := fabOf(w)
				small := make([]byte, 64)            // Go memory: injected or bounced
				large := w.Bytes()[8192 : 8192+5000] // region memory: a tracked write
				// Go memory past a scratch slot: registered (MR cache), the
				// handle kept by the path
				goPut, goGet := make([]byte, 2000), make([]byte, 2000)
				var stepErr error
				step := func() {
					for _, err := range []error{
						f.put(0, w.netOff, small),
						f.put(0, w.netOff+1024, large),
						f.putSignal(0, w.netOff+128, small, w.netOff+512, 1),
						f.put(0, w.netOff+6100, goPut),
						f.get(0, w.netOff+13300, goGet),
						f.flush(ctx, -1),
						fetchErr(f.fetchOp(0, w.netOff+520, AtomicUint64, OpSum, 1)),
					} {
						if err != nil && stepErr == nil {
							stepErr = err
						}
					}
				}
				step() // grow the tables
				n := testing.AllocsPerRun(50, step)
				if stepErr != nil {
					return stepErr
				}
				t.Logf("%v: %v allocations per round", w.Ordering(), n)
				if n != 0 && !testenv.Race { // the race detector's instrumentation allocates
					return fmt.Errorf("%v allocations per Put/Put/PutSignal/Put/Get/Flush/FetchAndOp round, want 0", n)
				}
				return nil
			})
		})
	}
}
