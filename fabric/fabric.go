package fabric

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
)

// Fabric is an open fabric (fi_fabric).
type Fabric struct {
	*obj
	info *Info
}

// OpenFabric opens the fabric described by info.
func OpenFabric(info *Info) (*Fabric, error) {
	if info == nil || info.c == 0 {
		return nil, fmt.Errorf("fabric: OpenFabric: nil info: %w", ErrInvalid)
	}
	if err := loadLib(); err != nil {
		return nil, err
	}
	var fid C.uintptr_t
	ret := C.weft_fabric_open(C.uintptr_t(info.c), &fid)
	runtime.KeepAlive(info)
	if ret != 0 {
		return nil, fmt.Errorf("fabric: open fabric %s: %w", info.Fabric, mkErr("fi_fabric", int(ret)))
	}
	f := &Fabric{obj: new(obj), info: info}
	f.init("fabric", uintptr(fid), orderDomain)
	backstop(f, f.obj)
	return f, nil
}

// Close closes every domain opened from the fabric (and their children),
// then the fabric. It is idempotent.
func (f *Fabric) Close() error {
	if f == nil {
		return nil
	}
	return f.close()
}

// Domain is an open access domain (fi_domain). It owns the CQs, AVs,
// counters, endpoints and memory regions opened from it, and closes them
// when it is closed.
type Domain struct {
	*obj
	fab     *Fabric // keeps the fabric reachable while the domain is
	info    *Info
	virt    bool // FI_MR_VIRT_ADDR granted: remote addresses are virtual addresses
	provKey bool // FI_MR_PROV_KEY granted
	mrLocal bool // FI_MR_LOCAL granted: local buffers need descriptors
	cache   mrCache
	spans   regSpans // live registrations, for fast calls
	keyMu   sync.Mutex
	nextKey uint64
	cfg     domainConfig // polling and fast calls of the objects opened from it
}

// OpenDomain opens the domain described by info in the fabric. The options
// set how the domain's CQs, counters and endpoints poll and enter C; what
// they leave unset takes the process-wide defaults of now (DomainOption).
func (f *Fabric) OpenDomain(info *Info, opts ...DomainOption) (*Domain, error) {
	if info == nil || info.c == 0 {
		return nil, fmt.Errorf("fabric: OpenDomain: nil info: %w", ErrInvalid)
	}
	cfg := defaultDomainConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if gone(f.handle()) {
		return nil, fmt.Errorf("fabric: OpenDomain: %w", ErrClosed)
	}
	var fid C.uintptr_t
	ret := C.weft_domain_open(C.uintptr_t(f.fid), C.uintptr_t(info.c), &fid)
	runtime.KeepAlive(info)
	if ret != 0 {
		return nil, fmt.Errorf("fabric: open domain %s: %w", info.Domain, mkErr("fi_domain", int(ret)))
	}
	d := &Domain{
		obj:     new(obj),
		fab:     f,
		info:    info,
		virt:    info.MRMode&MRVirtAddr != 0,
		provKey: info.MRMode&MRProvKey != 0,
		mrLocal: info.MRMode&MRLocal != 0,
		nextKey: 1,
		cfg:     cfg,
	}
	d.init("domain", uintptr(fid), orderDomain)
	d.cache.init(d)
	if err := f.adopt(d.obj); err != nil {
		d.close()
		return nil, err
	}
	backstop(d, d.obj)
	return d, nil
}

// Info returns the configuration the domain was opened with.
func (d *Domain) Info() *Info {
	if d == nil {
		return nil
	}
	return d.info
}

// Close closes the domain's endpoints, then memory regions and buffers,
// then CQs, AVs and counters, then the domain. It is idempotent.
func (d *Domain) Close() error {
	if d == nil {
		return nil
	}
	return d.close()
}

func (d *Domain) key() uint64 {
	d.keyMu.Lock()
	defer d.keyMu.Unlock()
	k := d.nextKey
	d.nextKey++
	return k
}
