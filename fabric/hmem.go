package fabric

/*
#include "shim.h"
*/
import "C"

import "fmt"

// HMEMIface names the kind of device memory a device registration covers
// (libfabric's enum fi_hmem_iface).
type HMEMIface int

// The device memory kinds of libfabric 1.17.
const (
	HMEMCUDA HMEMIface = C.FI_HMEM_CUDA
	HMEMROCR HMEMIface = C.FI_HMEM_ROCR
	HMEMZE   HMEMIface = C.FI_HMEM_ZE
)

// String returns libfabric's short name of the kind ("cuda", "rocr",
// "ze").
func (i HMEMIface) String() string {
	switch i {
	case HMEMCUDA:
		return "cuda"
	case HMEMROCR:
		return "rocr"
	case HMEMZE:
		return "ze"
	}
	return fmt.Sprintf("hmem-iface-%d", int(i))
}

// HMEMSupported reports whether provider (as in Hints.Provider) grants
// FI_HMEM for RDM endpoints: fi_getinfo asked with the capability and
// the FI_MR_HMEM registration mode it goes with. A
// provider that grants it may still refuse a kind of device memory whose
// runtime it cannot load; RegisterDevice says so.
func HMEMSupported(provider string) bool {
	infos, err := GetInfo(hmemHints(provider))
	if err != nil {
		return false
	}
	for _, i := range infos {
		if i.HasCaps(CapHMEM) {
			return true
		}
	}
	return false
}

func hmemHints(provider string) *Hints {
	return &Hints{Provider: provider, Caps: CapHMEM | CapMsg, MRMode: DefaultMRMode | MRHMEM}
}

// RegisterDevice registers length bytes of device memory at device
// address addr (a CUdeviceptr for HMEMCUDA) of device number device with
// fi_mr_regattr, so that operations read and write it directly (GPUDirect
// RDMA where the NIC can). The domain's provider must grant FI_HMEM
// (HMEMSupported); otherwise, or when the provider cannot use that kind of
// memory, the error wraps ErrNotSupported. The registration is not cached:
// Close deregisters it.
func (d *Domain) RegisterDevice(addr uint64, length int, iface HMEMIface, device int, access Access) (*MR, error) {
	if length <= 0 || access == 0 || addr == 0 || device < 0 {
		return nil, fmt.Errorf("fabric: RegisterDevice(%#x, %d, %s, device %d): %w", addr, length, iface, device, ErrInvalid)
	}
	if gone(d.handle()) {
		return nil, fmt.Errorf("fabric: RegisterDevice: %w", ErrClosed)
	}
	if !HMEMSupported(d.info.Provider) {
		return nil, fmt.Errorf("fabric: RegisterDevice: provider %s does not grant FI_HMEM: %w", d.info.Provider, ErrNotSupported)
	}
	key := d.requestedKey()
	var (
		fid   C.uintptr_t
		ckey  C.uint64_t
		cdesc C.uintptr_t
	)
	ret := C.weft_mr_regattr_hmem(C.uintptr_t(d.fid), C.uint64_t(addr), C.size_t(length), C.uint64_t(access), C.uint64_t(key),
		C.int(iface), C.uint64_t(device), &fid, &ckey, &cdesc)
	if ret != 0 {
		return nil, fmt.Errorf("fabric: register %d bytes of %s memory: %w: %w", length, iface, mkErr("fi_mr_regattr", int(ret)), ErrNotSupported)
	}
	e := &mrEntry{dom: d, base: uintptr(addr), length: length, access: access, key: uint64(ckey), desc: Desc(cdesc)}
	e.init("mr", uintptr(fid), orderMem)
	if err := d.adopt(&e.obj); err != nil {
		e.close()
		return nil, err
	}
	return &MR{e: e, device: true}, nil
}
