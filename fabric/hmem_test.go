package fabric

import (
	"errors"
	"os"
	"testing"
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
