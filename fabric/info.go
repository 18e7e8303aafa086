package fabric

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"github.com/weft-hpc/weft/internal/settings"
)

// Hints describe what the application needs from a provider (fi_getinfo
// hints). The zero value asks for an RDM endpoint with this package's
// default memory-registration mode and lets the provider choose the rest.
type Hints struct {
	Provider  string    // "" = any; e.g. "shm", "tcp;ofi_rxm", "sockets", "verbs;ofi_rxm"
	EPType    EPType    // EPRDM (default), EPMsg, EPDgram
	Caps      Caps      // required capabilities
	Threading Threading // ThreadUnspec lets the provider choose
	MRMode    MRMode    // 0 = DefaultMRMode
	MsgOrder  Order     // requested ordering; what was granted is in Info.MsgOrder
	OpFlags   uint64    // default transmit operation flags
	// JobSize is the number of ranks in the job (0: unknown). Select and
	// SelectOpen set FI_UNIVERSE_SIZE to it when the environment does not
	// set it (see the package documentation); GetInfo ignores it.
	JobSize int
}

// Info is one provider configuration returned by GetInfo: the facts of what
// was granted. It is read-only. The C fi_info behind it is freed when the
// Info becomes unreachable.
type Info struct {
	Provider, Fabric, Domain string
	EPType                   EPType
	Caps                     Caps
	Mode                     uint64 // mode bits the provider requires (always 0 here: weft supports none)
	MsgOrder                 Order  // granted message ordering (tx)
	CompOrder                uint64
	MRMode                   MRMode
	InjectSize, MaxMsgSize   int
	CQDataSize               int // bytes of remote CQ data; > 0 means SendData/WriteData work
	TxSize, RxSize           int
	MaxOrderRAWSize          int
	MaxOrderWARSize          int
	MaxOrderWAWSize          int
	MRKeySize                int
	IOVLimit, RMAIOVLimit    int
	AddrLen                  int
	Threading                Threading
	DataProgress             Progress
	ControlProgress          Progress
	ProviderVersion          uint32
	// Quirks are the known deviations of this provider (see Quirk).
	Quirks Quirk
	// Notes lists the provider quirks GetInfo applied or detected for this
	// configuration, in words (see the package documentation).
	Notes []string

	c       uintptr // *struct fi_info, owned
	strAddr bool    // FI_ADDR_STR: names are NUL-terminated strings
}

// infoFacts mirrors struct weft_info_facts.
type infoFacts struct {
	Caps, Mode, MsgOrder, CompOrder, TxOpFlags, RxOpFlags                              uint64
	EPType, Threading, DataProgress, ControlProgress, MRMode                           int64
	InjectSize, MaxMsgSize                                                             uint64
	CQDataSize, TxSize, RxSize, MaxOrderRAW, MaxOrderWAR, MaxOrder                     int64
	MRKeySize, IOVLimit, RMAIOVLimit, AddrLen, MaxEPTxCtx, EPCnt, AVType, MemTagFormat int64
	ProvVersion, AddrFormat                                                            int64
}

func newInfo(c uintptr) *Info {
	var f infoFacts
	C.weft_info_get(C.uintptr_t(c), (*C.struct_weft_info_facts)(unsafe.Pointer(&f)))
	i := &Info{
		Provider:        C.GoString(C.weft_info_prov(C.uintptr_t(c))),
		Fabric:          C.GoString(C.weft_info_fabric(C.uintptr_t(c))),
		Domain:          C.GoString(C.weft_info_domain(C.uintptr_t(c))),
		EPType:          epTypeFromC(f.EPType),
		Caps:            Caps(f.Caps),
		Mode:            f.Mode,
		MsgOrder:        Order(f.MsgOrder),
		CompOrder:       f.CompOrder,
		MRMode:          MRMode(f.MRMode),
		InjectSize:      int(f.InjectSize),
		MaxMsgSize:      int(f.MaxMsgSize),
		CQDataSize:      int(f.CQDataSize),
		TxSize:          int(f.TxSize),
		RxSize:          int(f.RxSize),
		MaxOrderRAWSize: int(f.MaxOrderRAW),
		MaxOrderWARSize: int(f.MaxOrderWAR),
		MaxOrderWAWSize: int(f.MaxOrder),
		MRKeySize:       int(f.MRKeySize),
		IOVLimit:        int(f.IOVLimit),
		RMAIOVLimit:     int(f.RMAIOVLimit),
		AddrLen:         int(f.AddrLen),
		Threading:       Threading(f.Threading),
		DataProgress:    Progress(f.DataProgress),
		ControlProgress: Progress(f.ControlProgress),
		ProviderVersion: uint32(f.ProvVersion),
		Quirks:          quirksOf(C.GoString(C.weft_info_prov(C.uintptr_t(c))), Caps(f.Caps)),
		c:               c,
		strAddr:         f.AddrFormat == C.FI_ADDR_STR,
	}
	runtime.AddCleanup(i, func(p uintptr) { C.weft_freeinfo(C.uintptr_t(p)) }, c)
	return i
}

// String describes the configuration in one line.
func (i *Info) String() string {
	if i == nil {
		return "<nil fabric.Info>"
	}
	s := fmt.Sprintf("%s (fabric %s, domain %s): ep=%s caps=%s order=%s mr=%s inject=%d maxmsg=%d cqdata=%d threading=%s progress=%s/%s",
		i.Provider, i.Fabric, i.Domain, i.EPType, i.Caps, i.MsgOrder, i.MRMode, i.InjectSize,
		i.MaxMsgSize, i.CQDataSize, i.Threading, i.DataProgress, i.ControlProgress)
	if i.Quirks != 0 {
		s += " quirks=" + i.Quirks.String()
	}
	if len(i.Notes) > 0 {
		s += " notes=[" + strings.Join(i.Notes, "; ") + "]"
	}
	return s
}

// SupportsRemoteCQData reports whether SendData/WriteData can carry data
// (CQ data size greater than zero).
func (i *Info) SupportsRemoteCQData() bool { return i.CQDataSize > 0 }

// HasCaps reports whether every capability in c was granted.
func (i *Info) HasCaps(c Caps) bool { return i.Caps.Has(c) }

// GetInfo returns the provider configurations that satisfy h, best first.
// A nil h is the zero Hints. The known libfabric 1.17 quirks are applied to
// the hints (see the package documentation) and recorded in Info.Notes.
// When nothing matches the error wraps ErrNoProvider. The first call in a
// process loads libfabric (see Loaded); when it cannot be loaded the error
// wraps ErrNotSupported.
func GetInfo(h *Hints) ([]*Info, error) {
	if err := checkSettings(); err != nil {
		return nil, err
	}
	if err := loadLib(); err != nil {
		return nil, err
	}
	var hh Hints
	if h != nil {
		hh = *h
	}
	q := applyQuirks(&hh)
	ch := C.struct_weft_hints{
		caps:      C.uint64_t(hh.Caps),
		msg_order: C.uint64_t(hh.MsgOrder),
		op_flags:  C.uint64_t(hh.OpFlags),
		ep_type:   C.int64_t(hh.EPType.c()),
		threading: C.int64_t(hh.Threading),
		mr_mode:   C.int64_t(hh.MRMode),
	}
	var prov *C.char
	if hh.Provider != "" {
		prov = C.CString(hh.Provider)
		defer C.free(unsafe.Pointer(prov))
	}
	var list C.uintptr_t
	ret := C.weft_getinfo(prov, &ch, &list)
	if ret == -C.FI_ENODATA && hh.MsgOrder != 0 {
		// Some providers (ofi_rxm with atomics) refuse any hint that asks
		// for more ordering than they give. Ordering is a request: retry
		// without it and report what was granted.
		ch.msg_order = 0
		if ret = C.weft_getinfo(prov, &ch, &list); ret == 0 {
			q.notes = append(q.notes, fmt.Sprintf("requested ordering %s not grantable with these caps; retried without ordering hints (check MsgOrder)", hh.MsgOrder))
		}
	}
	if ret != 0 {
		err := mkErr("fi_getinfo", int(ret))
		if syscall.Errno(-ret) == syscall.ENODATA {
			return nil, fmt.Errorf("fabric: no provider for %s: %w", hintsString(&hh), ErrNoProvider)
		}
		return nil, fmt.Errorf("fabric: getinfo for %s: %w", hintsString(&hh), err)
	}
	defer C.weft_freeinfo(list)
	var out []*Info
	for p := uintptr(list); p != 0; p = uintptr(C.weft_info_next(C.uintptr_t(p))) {
		d := uintptr(C.weft_dupinfo(C.uintptr_t(p)))
		if d == 0 {
			return nil, fmt.Errorf("fabric: fi_dupinfo failed: %w", syscall.ENOMEM)
		}
		i := newInfo(d)
		if q.keep != nil && !q.keep(i) {
			continue
		}
		i.Notes = append(i.Notes, q.notes...)
		if q.post != nil {
			q.post(i, &hh)
		}
		out = append(out, i)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("fabric: no provider for %s (%s): %w", hintsString(&hh), strings.Join(q.notes, "; "), ErrNoProvider)
	}
	return out, nil
}

func hintsString(h *Hints) string {
	p := h.Provider
	if p == "" {
		p = "any provider"
	}
	return fmt.Sprintf("%s ep=%s caps=%s order=%s mr=%s", p, h.EPType, h.Caps, h.MsgOrder, h.MRMode)
}

// checkSettings validates fabric's settings, WEFT_LOG_LEVEL and WEFT_TUNE
// (internal/settings): a bad value fails the first use of the package
// instead of being ignored.
func checkSettings() error {
	if err := settings.Check("fabric"); err != nil {
		return fmt.Errorf("fabric: %w: %w", err, ErrInvalid)
	}
	return nil
}

// envProvider is WEFT_PROVIDER.
func envProvider() string {
	p, _, _ := settings.Str("WEFT_PROVIDER")
	return p
}
