package fabric

import (
	"bytes"
	"errors"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/internal/testenv"
)

// fastUsed reads a stack's count of fast calls (the holder's plain
// counter: read only while no call on it runs).
func fastUsed(f *fastStack) uint64 {
	if f == nil {
		return 0
	}
	return f.used
}

func TestFastCallNames(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]FastCall{"auto": FastCallAuto, "on": FastCallOn, "off": FastCallOff} {
		if got := parseFastCall(v); got != want || got.String() != v {
			t.Errorf("parseFastCall(%q) = %v, want %v", v, got, want)
		}
	}
	if FastCallOn.String() != "on" || FastCall(9).String() != "FastCall(9)" {
		t.Errorf("names: %v %v", FastCallOn, FastCall(9))
	}
}

// TestFastCallSelection: auto gives shm's CQs and endpoints a C stack and
// leaves other providers on cgo; on gives every provider one; off none.
func TestFastCallSelection(t *testing.T) {
	if !fastSupported() {
		testenv.Skip(t, "amd64", "no fast-call trampoline on %s", runtime.GOARCH)
	}
	for _, tc := range []struct {
		mode FastCall
		prov string
		want bool
	}{
		{FastCallAuto, "shm", true},
		{FastCallAuto, "sockets", false},
		{FastCallOn, "sockets", true},
		{FastCallOff, "shm", false},
	} {
		t.Run(tc.mode.String()+"/"+tc.prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: tc.prov, Caps: CapMsg}, WithFastCall(tc.mode))
			if got := p.a.cq.fast != nil && p.a.ep.fast != nil; got != tc.want {
				t.Errorf("fast stacks: %v, want %v", got, tc.want)
			}
		})
	}
}

func fastSupported() bool { return runtime.GOARCH == "amd64" }

// TestFastCallMemoryRule: ops, batched or single, take the fast path only
// when every buffer is
// inside a live registration (Alloc'd or registered, pinned Go memory);
// other memory goes through cgo and its pointer check, and a registration
// that goes away stops being trusted.
func TestFastCallMemoryRule(t *testing.T) {
	if !fastSupported() {
		testenv.Skip(t, "amd64", "no fast-call trampoline on %s", runtime.GOARCH)
	}
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, WithFastCall(FastCallAuto))
	setMRCache(p.dom, 0) // a closed MR deregisters at once
	alloc, err := p.dom.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	goMem := make([]byte, 4096)
	var pin runtime.Pinner
	pin.Pin(&goMem[0])
	defer pin.Unpin()
	f := p.a.ep.fast
	// Each buffer is posted twice: in a batch, then by the single Recv.
	post := func(buf []byte, single bool) {
		t.Helper()
		if single {
			if err := p.a.ep.Recv(buf, 0, AddrUnspec, 7); err != nil {
				t.Fatal(err)
			}
		} else if _, err := p.a.ep.PostBatch([]Op{RecvOp(buf, 0, AddrUnspec, 7)}); err != nil {
			t.Fatal(err)
		}
		if err := p.a.ep.Cancel(7); err != nil {
			t.Fatal(err)
		}
		if _, err := waitComp(t, p.a.cq); !errors.Is(err, ErrCanceled) {
			t.Fatalf("canceled receive: %v", err)
		}
	}
	check := func(what string, buf []byte, fast bool) {
		t.Helper()
		for _, single := range []bool{false, true} {
			before := fastUsed(f)
			post(buf, single)
			if got := fastUsed(f) > before; got != fast {
				t.Errorf("%s (single op %v): fast path %v, want %v", what, single, got, fast)
			}
		}
	}
	check("Alloc buffer", alloc.Bytes(), true)
	check("pinned, unregistered Go memory", goMem, false)
	mr, err := p.dom.Register(goMem, AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	check("registered Go memory", goMem[100:200], true)
	check("at the registration's end", goMem[4000:], true)
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	check("after the registration closed", goMem[100:200], false)
	// A buffer that runs past an Alloc'd region is not trusted either.
	over := Op{Kind: OpKindRecv, Buf: unsafe.Pointer(&alloc.Bytes()[0]), Len: 8192, Addr: AddrUnspec}
	if ok := f.opsRegistered(p.dom, []Op{over}); ok {
		t.Errorf("buffer past the end of its registration accepted")
	}
}

// TestFastCallSingleOpErrors: a single operation that libfabric refuses
// fails the same way through a fast call as through cgo (injects into a
// peer that never reads until shm's queue is full: ErrAgain), and an
// inject from unregistered Go memory takes the fast path (injectKind) and
// arrives intact.
func TestFastCallSingleOpErrors(t *testing.T) {
	var msgs [2]string
	for i, mode := range []FastCall{FastCallAuto, FastCallOff} {
		p := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, WithFastCall(mode))
		buf, err := p.dom.Alloc(64)
		if err != nil {
			t.Fatal(err)
		}
		wantFast := mode == FastCallAuto && fastSupported()
		in, err := p.dom.Alloc(64)
		if err != nil {
			t.Fatal(err)
		}
		goMsg := []byte("from Go!")
		if err := p.b.ep.Recv(in.Bytes(), in.Desc(), AddrUnspec, 9); err != nil {
			t.Fatal(err)
		}
		before := fastUsed(p.a.ep.fast)
		retry(t, func() error { return p.a.ep.Inject(goMsg, p.a.addr[1]) }, p.a.cq, p.b.cq)
		if fast := fastUsed(p.a.ep.fast) > before; fast != wantFast {
			t.Errorf("%v: an inject from unregistered Go memory: fast path %v, want %v", mode, fast, wantFast)
		}
		c, err := waitComp(t, p.b.cq)
		if err != nil {
			t.Fatal(err)
		}
		if got := in.Bytes()[:c.Len]; string(got) != string(goMsg) {
			t.Errorf("%v: received %q, want %q", mode, got, goMsg)
		}
		before = fastUsed(p.a.ep.fast)
		for n := 0; ; n++ {
			err = p.a.ep.Inject(buf.Bytes()[:8], p.a.addr[1])
			if err != nil {
				break
			}
			if n == 1<<16 {
				t.Fatalf("%v: %d injects into a peer that never reads all succeeded", mode, n)
			}
		}
		if !errors.Is(err, ErrAgain) {
			t.Fatalf("%v: inject into a full queue: %v, want ErrAgain", mode, err)
		}
		msgs[i] = err.Error()
		if fast := fastUsed(p.a.ep.fast) > before; fast != wantFast {
			t.Errorf("%v: fast path taken: %v", mode, fast)
		}
	}
	if msgs[0] != msgs[1] {
		t.Errorf("errors differ:\n fast: %s\n cgo:  %s", msgs[0], msgs[1])
	}
}

// TestFastCallPingPong drives a batch ping-pong through the fast path
// (PostAndRead: repost, inject, spin on the peer's CQ) and checks every
// payload.
func TestFastCallPingPong(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg | CapTagged}, WithFastCall(FastCallAuto))
	buf, err := p.dom.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	ra, rb, ping, pong := buf.Bytes()[:8], buf.Bytes()[8:16], buf.Bytes()[16:24], buf.Bytes()[24:32]
	postAll(t, p.b.ep, []Op{TRecvOp(rb, buf.Desc(), AddrUnspec, 1, 0, 2)}, p.b.cq)
	var out [4]Completion
	half := func(ep *Endpoint, ops []Op, peerCQ *CQ) { halfTrip(t, ep, ops, peerCQ, out[:], 64) }
	const rounds = 2000
	for i := 0; i < rounds; i++ {
		ping[0], ping[1] = byte(i), byte(i>>8)
		half(p.a.ep, []Op{TRecvOp(ra, buf.Desc(), AddrUnspec, 1, 0, 1), TInjectOp(ping, p.a.addr[1], 1)}, p.b.cq)
		if rb[0] != byte(i) || rb[1] != byte(i>>8) {
			t.Fatalf("round %d: b got %v", i, rb[:2])
		}
		pong[0], pong[1] = ^rb[0], ^rb[1]
		half(p.b.ep, []Op{TRecvOp(rb, buf.Desc(), AddrUnspec, 1, 0, 2), TInjectOp(pong, p.b.addr[0], 1)}, p.a.cq)
		if ra[0] != ^byte(i) || ra[1] != ^byte(i>>8) {
			t.Fatalf("round %d: a got %v", i, ra[:2])
		}
	}
	if fastSupported() && (fastUsed(p.a.cq.fast) < rounds || fastUsed(p.b.cq.fast) < rounds) {
		t.Errorf("fast calls: %d and %d, want ≥ %d each", fastUsed(p.a.cq.fast), fastUsed(p.b.cq.fast), rounds)
	}
}

// TestFastCallConcurrent has several goroutines read one CQ and post on
// one endpoint at once: one of them holds the stack, the others take cgo,
// and no completion is lost or doubled.
func TestFastCallConcurrent(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, WithFastCall(FastCallAuto))
	buf, err := p.dom.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	const msgs, readers = 2000, 4
	for i := 0; i < 32; i++ {
		postAll(t, p.b.ep, []Op{RecvOp(buf.Bytes()[i*8:i*8+8], buf.Desc(), AddrUnspec, uint64(100+i))}, p.b.cq)
	}
	var got, reposts atomic.Int64
	deadline := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out [8]Completion
			for got.Load() < msgs && time.Now().Before(deadline) {
				n, err := p.b.cq.ReadSpin(out[:], 32)
				if err != nil {
					fail(err)
					return
				}
				for _, c := range out[:n] {
					got.Add(1)
					i := int(c.Context - 100)
					op := []Op{RecvOp(buf.Bytes()[i*8:i*8+8], buf.Desc(), AddrUnspec, c.Context)}
					for {
						_, err := p.b.ep.PostBatch(op)
						if err == nil {
							reposts.Add(1)
							break
						}
						if !errors.Is(err, ErrAgain) {
							fail(err)
							return
						}
						p.b.cq.Read(nil)
					}
				}
			}
		}()
	}
	msg := buf.Bytes()[2048:2056]
	for i := 0; i < msgs && time.Now().Before(deadline); {
		err := p.a.ep.Inject(msg, p.a.addr[1])
		if err == nil {
			i++
			continue
		}
		if !errors.Is(err, ErrAgain) {
			t.Fatal(err)
		}
		p.a.cq.Read(nil)
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if got.Load() != msgs || reposts.Load() != msgs {
		t.Fatalf("%d completions, %d reposts; want %d each", got.Load(), reposts.Load(), msgs)
	}
	// Drain: nothing extra may be queued.
	var out [8]Completion
	if n, err := p.b.cq.ReadSpin(out[:], 100); n != 0 || err != nil {
		t.Fatalf("extra completions: %d %v", n, err)
	}
}

// TestFastCallGC runs full collections while a goroutine polls through
// the fast path: each collection waits for at most one bounded call.
func TestFastCallGC(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, WithFastCall(FastCallAuto))
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var out [4]Completion
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := p.a.cq.ReadSpin(out[:], FastSpinMax); err != nil {
				done <- err
				return
			}
		}
	}()
	var sink [][]byte
	start := time.Now()
	for i := 0; i < 20; i++ {
		for j := 0; j < 1000; j++ {
			sink = append(sink, make([]byte, 256))
		}
		runtime.GC()
		sink = sink[:0]
	}
	elapsed := time.Since(start)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if elapsed > 10*time.Second {
		t.Errorf("20 collections took %v next to a fast-path poller", elapsed)
	}
	if fastSupported() && fastUsed(p.a.cq.fast) == 0 {
		t.Errorf("the poller never took the fast path")
	}
}

func TestRegSpans(t *testing.T) {
	var s regSpans
	s.add(1000, 100)
	s.add(500, 1000) // contains the first
	s.add(1000, 100) // the same range twice
	for _, tc := range []struct {
		p, n uintptr
		ok   bool
	}{
		{1000, 100, true}, {1050, 60, true}, {600, 10, true}, {1499, 1, true}, {1499, 2, false},
		{499, 1, false}, {2000, 1, false}, {^uintptr(0) - 1, 8, false},
	} {
		if _, ok := s.find(tc.p, tc.n); ok != tc.ok {
			t.Errorf("find(%d, %d) = %v, want %v", tc.p, tc.n, ok, tc.ok)
		}
	}
	g := s.gen.Load()
	s.remove(500, 1000)
	if s.gen.Load() == g {
		t.Errorf("remove did not change the generation")
	}
	if _, ok := s.find(600, 10); ok {
		t.Errorf("removed span still found")
	}
	s.remove(1000, 100)
	if _, ok := s.find(1000, 100); !ok {
		t.Errorf("second copy of a span removed with the first")
	}
	s.remove(1000, 100)
	s.remove(1000, 100) // absent: no effect
	if _, ok := s.find(1000, 1); ok {
		t.Errorf("span found after both copies were removed")
	}
}

// TestFastCallProfiling takes a CPU profile while a goroutine polls
// through the fast path: SIGPROF lands in C code on the CQ's stack, which
// the runtime must record as external code without unwinding it.
func TestFastCallProfiling(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, WithFastCall(FastCallAuto))
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		testenv.Skip(t, "profiling", "CPU profiling unavailable: %v", err) // another profile is running (go test -cpuprofile)
	}
	var out [4]Completion
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		if _, err := p.a.cq.ReadSpin(out[:], FastSpinMax); err != nil {
			pprof.StopCPUProfile()
			t.Fatal(err)
		}
	}
	pprof.StopCPUProfile()
	if prof.Len() == 0 {
		t.Errorf("empty profile")
	}
	if fastSupported() && fastUsed(p.a.cq.fast) == 0 {
		t.Errorf("the poller never took the fast path")
	}
}

// TestFastWanted: auto takes fast calls only on shm and only on a Go
// release the trampoline was verified against; on takes them everywhere
// the trampoline exists; off never.
func TestFastWanted(t *testing.T) {
	if !fastSupported() {
		testenv.Skip(t, "amd64", "no fast-call trampoline on %s", runtime.GOARCH)
	}
	verified := "go1.26.8"
	for _, tc := range []struct {
		m         FastCall
		prov, ver string
		want      bool
	}{
		{FastCallAuto, "shm", verified, true},
		{FastCallAuto, "shm", "go1.99.1", false},
		{FastCallAuto, "shm", "devel go1.27-abc", false},
		{FastCallAuto, "tcp", verified, false},
		{FastCallOn, "shm", "go1.99.1", true},
		{FastCallOn, "tcp", verified, true},
		{FastCallOff, "shm", verified, false},
	} {
		if got := fastWanted(tc.m, tc.prov, tc.ver); got != tc.want {
			t.Errorf("fastWanted(%v, %s, %s) = %v, want %v", tc.m, tc.prov, tc.ver, got, tc.want)
		}
	}
}
