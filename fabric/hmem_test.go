package fabric

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"
	"unsafe"
)

// openDomain opens a domain of provider prov (skips when it is absent).
func openDomain(t *testing.T, prov string) *Domain {
	t.Helper()
	infos, err := GetInfo(&Hints{Provider: prov})
	skipNoProvider(t, prov, err)
	f, err := OpenFabric(infos[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	d, err := f.OpenDomain(infos[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestHMEMCapability: the FI_HMEM check asks fi_getinfo for the
// capability, and device registration follows it. In libfabric 1.17 shm
// grants FI_HMEM (its CUDA, ROCr and ZE support is loaded at run time)
// and tcp does not; without a GPU, shm's fi_mr_regattr of CUDA memory
// fails (its CUDA interface is off), so callers stage through host
// memory on both; with a GPU's driver present the shm registration is
// not attempted here (no device pointer to give it).
func TestHMEMCapability(t *testing.T) {
	tcp := openDomain(t, "tcp;ofi_rxm")
	if HMEMSupported("tcp") || HMEMSupported("tcp;ofi_rxm") {
		t.Fatal("tcp grants FI_HMEM in libfabric 1.17?")
	}
	if _, err := GetInfo(hmemHints("tcp;ofi_rxm")); !errors.Is(err, ErrNoProvider) {
		t.Fatalf("fi_getinfo tcp with FI_HMEM: %v, want ErrNoProvider", err)
	}
	if _, err := tcp.RegisterDevice(1<<32, 4096, HMEMCUDA, 0, AccessSend); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("RegisterDevice on tcp: %v, want ErrNotSupported", err)
	}
	if _, err := tcp.RegisterDevice(0, 4096, HMEMCUDA, 0, AccessSend); !errors.Is(err, ErrInvalid) {
		t.Fatalf("RegisterDevice of address 0: %v, want ErrInvalid", err)
	}
	shm := openDomain(t, "shm")
	infos, err := GetInfo(hmemHints("shm"))
	if err != nil || !infos[0].HasCaps(CapHMEM) || !HMEMSupported("shm") {
		t.Fatalf("shm with FI_HMEM: %v (%d infos), want the capability granted", err, len(infos))
	}
	t.Logf("shm grants FI_HMEM: %s", infos[0].Caps)
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		return // a GPU: the registration below would need a real device pointer
	}
	mr, err := shm.RegisterDevice(1<<32, 4096, HMEMCUDA, 0, AccessSend)
	if err == nil {
		mr.Close()
		t.Fatal("shm registered CUDA memory on a machine without a GPU")
	}
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("RegisterDevice of CUDA memory on shm without a GPU: %v, want ErrNotSupported", err)
	}
	t.Logf("shm without a GPU: %v", err)
}

// TestSendDataDevice sends from memory named by its address (what device
// memory registered with RegisterDevice is sent as; here the domain's mmap
// memory, registered as host memory) with CQ data, over shm; bad
// addresses and closed endpoints are errors.
func TestSendDataDevice(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg})
	buf, err := p.dom.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	src, dst := buf.Bytes()[:4096], buf.Bytes()[4096:]
	for i := range src {
		src[i] = byte(i * 7)
	}
	if err := p.b.ep.Recv(dst, buf.Desc(), AddrUnspec, 2); err != nil {
		t.Fatal(err)
	}
	addr := uint64(uintptr(unsafe.Pointer(&src[100])))
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := p.a.ep.SendDataDevice(addr, 1000, buf.Desc(), 0xfeed, p.a.addr[1], 1)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrAgain) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		drain(p.a.cq) // progress (shm connects the pair)
		drain(p.b.cq)
	}
	mustComp(t, p.a.cq, p.b.cq)
	c := mustComp(t, p.b.cq, p.a.cq)
	if c.Len != 1000 || c.Data != 0xfeed || !bytes.Equal(dst[:1000], src[100:1100]) {
		t.Fatalf("received %d bytes, data %#x, equal %v", c.Len, c.Data, bytes.Equal(dst[:1000], src[100:1100]))
	}
	if err := p.a.ep.SendDataDevice(0, 8, buf.Desc(), 0, p.a.addr[1], 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("address 0: %v, want ErrInvalid", err)
	}
	p.a.ep.Close()
	if err := p.a.ep.SendDataDevice(addr, 8, buf.Desc(), 0, p.a.addr[1], 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed endpoint: %v, want ErrClosed", err)
	}
}
