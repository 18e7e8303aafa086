package fabric

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestUnknownProvider(t *testing.T) {
	_, err := GetInfo(&Hints{Provider: "no-such-provider"})
	if !errors.Is(err, ErrNoProvider) {
		t.Fatalf("GetInfo(no-such-provider) = %v, want ErrNoProvider", err)
	}
	if _, err := Select(&Hints{Provider: "no-such-provider"}, true); !errors.Is(err, ErrNoProvider) {
		t.Fatalf("Select = %v, want ErrNoProvider", err)
	}
	t.Setenv("WEFT_PROVIDER", "still-no-such-provider")
	if _, err := Select(nil, true); !errors.Is(err, ErrNoProvider) {
		t.Fatalf("Select with bad WEFT_PROVIDER = %v", err)
	}
}

func TestSelect(t *testing.T) {
	t.Setenv("WEFT_PROVIDER", "")
	i, err := Select(&Hints{Caps: CapMsg | CapTagged}, true)
	if err != nil {
		t.Fatal(err)
	}
	if i.Provider != "shm" {
		t.Errorf("one node: selected %s, want shm", i.Provider)
	}
	i, err = Select(&Hints{Caps: CapMsg | CapTagged}, false)
	if err != nil {
		t.Fatal(err)
	}
	if i.Provider != "tcp;ofi_rxm" && i.Provider != "verbs;ofi_rxm" {
		t.Errorf("several nodes: selected %s", i.Provider)
	}
	t.Setenv("WEFT_PROVIDER", "sockets")
	if i, err = Select(&Hints{Caps: CapMsg}, true); err != nil || i.Provider != "sockets" {
		t.Errorf("WEFT_PROVIDER=sockets: %v %v", i, err)
	}
	// The API overrides the environment.
	if i, err = Select(&Hints{Provider: "shm", Caps: CapMsg}, true); err != nil || i.Provider != "shm" {
		t.Errorf("Hints.Provider=shm: %v %v", i, err)
	}
	// shm across nodes is refused at once.
	if i, err = Select(&Hints{Provider: "shm", Caps: CapMsg}, false); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "several nodes") {
		t.Errorf("Hints.Provider=shm across nodes: %v %v, want ErrInvalid", i, err)
	}
	// tcp alone is MSG-only: an RDM request is served by tcp;ofi_rxm.
	infos, err := GetInfo(&Hints{Provider: "tcp", Caps: CapMsg})
	if err != nil || infos[0].Provider != "tcp;ofi_rxm" || len(infos[0].Notes) == 0 {
		t.Errorf("tcp RDM: %v %v", infos, err)
	}
}

func TestInfoFacts(t *testing.T) {
	infos, err := GetInfo(&Hints{Provider: "shm", Caps: CapMsg | CapTagged | CapRMA})
	if err != nil {
		t.Fatal(err)
	}
	i := infos[0]
	if i.InjectSize <= 0 || i.MaxMsgSize <= 0 || i.CQDataSize <= 0 || i.EPType != EPRDM {
		t.Errorf("implausible facts: %s", i)
	}
	if i.DataProgress != ProgressManual {
		t.Errorf("shm data progress %s, want manual", i.DataProgress)
	}
	if i.MsgOrder.Has(OrderWAW) {
		t.Errorf("shm granted WAW without an ordering hint: %s", i.MsgOrder)
	}
	if i.String() == "" {
		t.Error("empty String")
	}
}

func TestClosedAndDoubleClose(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg | CapTagged | CapRMA | CapAtomic})
	buf := make([]byte, 8)
	if err := p.a.ep.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.a.ep.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ep := p.a.ep
	ops := map[string]error{
		"Send":          ep.Send(buf, 0, 1, 1),
		"SendData":      ep.SendData(buf, 0, 1, 1, 1),
		"Recv":          ep.Recv(buf, 0, AddrUnspec, 1),
		"Inject":        ep.Inject(buf, 1),
		"InjectData":    ep.InjectData(buf, 1, 1),
		"TSend":         ep.TSend(buf, 0, 1, 1, 1),
		"TSendData":     ep.TSendData(buf, 0, 1, 1, 1, 1),
		"TInject":       ep.TInject(buf, 1, 1),
		"TInjectData":   ep.TInjectData(buf, 1, 1, 1),
		"TRecv":         ep.TRecv(buf, 0, AddrUnspec, 1, 0, 1),
		"Write":         ep.Write(buf, 0, 1, 0, 0, 1),
		"WriteData":     ep.WriteData(buf, 0, 1, 1, 0, 0, 1),
		"WriteMsg":      ep.WriteMsg(buf, 0, 1, 0, 0, 1, OpFence),
		"InjectWrite":   ep.InjectWrite(buf, 1, 0, 0),
		"Read":          ep.Read(buf, 0, 1, 0, 0, 1),
		"Atomic":        ep.Atomic(buf, 0, Uint64, OpSum, 1, 0, 0, 1),
		"FetchAtomic":   ep.FetchAtomic(buf, 0, buf, 0, Uint64, OpSum, 1, 0, 0, 1),
		"CompareAtomic": ep.CompareAtomic(buf, 0, buf, 0, buf, 0, Uint64, OpCswap, 1, 0, 0, 1),
		"Cancel":        ep.Cancel(1),
	}
	_, ops["Name"] = ep.Name()
	_, ops["AtomicValid"] = ep.AtomicValid(Uint64, OpSum)
	for name, err := range ops {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s on closed endpoint: %v, want ErrClosed", name, err)
		}
	}
	// Closing the domain closes the rest; everything is then closed.
	if err := p.dom.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.dom.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.b.cq.Read(make([]Completion, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Read on closed CQ: %v", err)
	}
	if _, err := p.b.av.Insert([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Insert on closed AV: %v", err)
	}
	if err := p.b.ep.TSend(buf, 0, 0, 0, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("TSend after domain close: %v", err)
	}
	if _, err := p.dom.OpenCQ(1); !errors.Is(err, ErrClosed) {
		t.Errorf("OpenCQ on closed domain: %v", err)
	}
	if _, err := p.dom.Register(buf, AccessRemoteWrite); !errors.Is(err, ErrClosed) {
		t.Errorf("Register on closed domain: %v", err)
	}
	if err := p.fab.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.fab.OpenDomain(p.info); !errors.Is(err, ErrClosed) {
		t.Errorf("OpenDomain on closed fabric: %v", err)
	}
}

func TestBadArguments(t *testing.T) {
	if _, err := OpenFabric(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("OpenFabric(nil): %v", err)
	}
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg | CapRMA})
	if _, err := p.dom.Register(nil, AccessRemoteWrite); !errors.Is(err, ErrInvalid) {
		t.Errorf("Register(nil): %v", err)
	}
	if _, err := p.dom.Register(make([]byte, 8), 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("Register with no access: %v", err)
	}
	if _, err := p.dom.Alloc(0); !errors.Is(err, ErrInvalid) {
		t.Errorf("Alloc(0): %v", err)
	}
	if _, err := p.dom.OpenCQ(-1); !errors.Is(err, ErrInvalid) {
		t.Errorf("OpenCQ(-1): %v", err)
	}
	if _, err := p.dom.OpenEndpoint(p.info, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("OpenEndpoint(nil cq): %v", err)
	}
	if _, err := p.a.av.Insert(make([]byte, p.info.AddrLen+1)); !errors.Is(err, ErrAddrNotAvail) {
		t.Errorf("Insert of a bad address: %v, want ErrAddrNotAvail", err)
	}
	if _, err := p.a.av.Insert([]byte{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Insert of an empty address: %v", err)
	}
	if _, err := p.a.av.Lookup(Addr(1000)); err == nil {
		t.Error("Lookup of an address never inserted succeeded")
	}
	// A buffer outside the registration has no remote address.
	buf := make([]byte, 64)
	mr, err := p.dom.Register(buf, AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	if ra := mr.RemoteAddr(make([]byte, 8)); ra != ^uint64(0) {
		t.Errorf("RemoteAddr of unregistered memory = %#x", ra)
	}
}

// TestUnregisteredTarget targets memory the peer never registered: an
// error, never a crash. RemoteAddr of such memory is rejected before C on
// every provider; sockets (the one provider here that checks keys and
// ranges) also turns a stray address into an error completion. shm and
// tcp;ofi_rxm in 1.17 trust the initiator (shm crashes the target on a wild
// address with delivery-complete writes), so they are not given one.
func TestUnregisteredTarget(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapRMA | CapAtomic})
			target := make([]byte, 64)
			mr, err := p.dom.Register(target, AccessRemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			src, err := p.dom.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			unreg := make([]byte, 8)
			raddr := mr.RemoteAddr(unreg)
			ep, dst := p.a.ep, p.a.addr[1]
			for name, err := range map[string]error{
				"Write":       ep.Write(src.Bytes(), src.Desc(), dst, raddr, mr.Key(), 1),
				"WriteData":   ep.WriteData(src.Bytes(), src.Desc(), 1, dst, raddr, mr.Key(), 1),
				"WriteMsg":    ep.WriteMsg(src.Bytes(), src.Desc(), dst, raddr, mr.Key(), 1, OpDeliveryComplete),
				"InjectWrite": ep.InjectWrite(src.Bytes()[:8], dst, raddr, mr.Key()),
				"Read":        ep.Read(src.Bytes(), src.Desc(), dst, raddr, mr.Key(), 1),
				"Atomic":      ep.Atomic(src.Bytes()[:8], src.Desc(), Uint64, OpSum, dst, raddr, mr.Key(), 1),
			} {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("%s to unregistered memory: %v, want ErrInvalid", name, err)
				}
			}
			if p.info.Quirks&QuirkNoRemoteKeyCheck != 0 {
				return // a wild address could crash this process
			}
			// A plausible address just past the registration.
			raddr = mr.RemoteAddr(target[56:]) + 64
			deadline := time.Now().Add(5 * time.Second)
			for {
				err = ep.Write(src.Bytes(), src.Desc(), dst, raddr, mr.Key(), 1)
				if !errors.Is(err, ErrAgain) || time.Now().After(deadline) {
					break
				}
				drain(p.a.cq)
				drain(p.b.cq)
			}
			if err == nil {
				_, err = waitComp(t, p.a.cq, p.b.cq)
			}
			var ce *CQError
			if !errors.As(err, &ce) {
				t.Fatalf("write past the registration on sockets: %v, want a CQError", err)
			}
			t.Logf("%v", err)
		})
	}
}

func TestErrorValues(t *testing.T) {
	e := mkErr("fi_test", -int(syscall.EAGAIN))
	if !errors.Is(e, ErrAgain) || !errors.Is(e, syscall.EAGAIN) || errors.Is(e, ErrClosed) {
		t.Errorf("EAGAIN error matching wrong: %v", e)
	}
	if !errors.Is(mkErr("x", -int(errnoTrunc)), ErrTruncated) || !errors.Is(mkErr("x", -int(syscall.ECANCELED)), ErrCanceled) {
		t.Error("truncation/cancel sentinels")
	}
	if !errors.Is(mkErr("x", -int(syscall.ENOSYS)), ErrNotSupported) {
		t.Error("ENOSYS is not ErrNotSupported")
	}
	if mkErr("x", 0) != nil {
		t.Error("mkErr(0) != nil")
	}
	// EAGAIN on the hot path is preallocated.
	if a := testing.AllocsPerRun(100, func() { _ = opErr(opTSend, -11) }); a != 0 {
		t.Errorf("EAGAIN allocates %v times", a)
	}
}

func TestEPTypesAndDatatypes(t *testing.T) {
	infos, err := GetInfo(&Hints{Provider: "tcp", EPType: EPMsg, Caps: CapMsg})
	skipNoProvider(t, "tcp", err)
	if infos[0].EPType != EPMsg || infos[0].Provider != "tcp" || len(infos[0].Notes) != 0 {
		t.Errorf("tcp MSG: %s", infos[0])
	}
	infos, err = GetInfo(&Hints{Provider: "udp", EPType: EPDgram, Caps: CapMsg})
	skipNoProvider(t, "udp", err)
	if infos[0].EPType != EPDgram {
		t.Errorf("udp DGRAM: %s", infos[0])
	}
	for dt, size := range map[Datatype]int{Int8: 1, Uint16: 2, Float32: 4, Uint64: 8, Float64: 8, Complex128: 16, Datatype(999): 0} {
		if dt.Size() != size {
			t.Errorf("Datatype(%d).Size() = %d, want %d", dt, dt.Size(), size)
		}
	}
}

// TestInjectTooLarge: an inject above Info.InjectSize is an error before C
// (ofi_rxm would answer EAGAIN forever, shm would accept it).
func TestInjectTooLarge(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapTagged})
			big := make([]byte, p.info.InjectSize+1)
			for name, err := range map[string]error{
				"Inject":      p.a.ep.Inject(big, p.a.addr[1]),
				"InjectData":  p.a.ep.InjectData(big, 1, p.a.addr[1]),
				"TInject":     p.a.ep.TInject(big, p.a.addr[1], 1),
				"TInjectData": p.a.ep.TInjectData(big, 1, p.a.addr[1], 1),
				"InjectWrite": p.a.ep.InjectWrite(big, p.a.addr[1], 0, 0),
			} {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("%s of %d bytes (inject size %d): %v, want ErrInvalid", name, len(big), p.info.InjectSize, err)
				}
			}
		})
	}
}

// TestBadSettings: a bad fabric setting or WEFT_TUNE fails the first use of
// the package (GetInfo, Select) with ErrInvalid naming the variable and the
// allowed values, instead of a warning and the default.
func TestBadSettings(t *testing.T) {
	for _, c := range [][3]string{
		{"WEFT_FASTCALL", "fast", "auto, on, off"},
		{"WEFT_LOG_LEVEL", "loud", "trace, debug"},
		{"WEFT_TUNE", "pollpace=9", "0..8"},
		{"WEFT_TUNE", "pollyield=soon", "a duration"},
		{"WEFT_TUNE", "WEFT_POLL_PACE=1", "key=value"},
	} {
		t.Run(c[0]+"="+c[1], func(t *testing.T) {
			t.Setenv(c[0], c[1])
			_, err := GetInfo(&Hints{Provider: "shm"})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c[0]) || !strings.Contains(err.Error(), c[2]) {
				t.Fatalf("GetInfo: %v, want ErrInvalid naming %s and %q", err, c[0], c[2])
			}
			if _, err := Select(nil, true); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Select: %v, want ErrInvalid", err)
			}
		})
	}
}
