package fabric

import "strings"

// quirk is what applyQuirks decided for one GetInfo call.
type quirk struct {
	notes []string
	keep  func(*Info) bool
	post  func(*Info, *Hints)
}

// applyQuirks rewrites the hints for the libfabric 1.17 provider behaviour
// documented in the package doc.
func applyQuirks(h *Hints) quirk {
	var q quirk
	if h.MRMode == 0 {
		h.MRMode = DefaultMRMode
	}
	if h.Caps&CapRemoteCQData != 0 {
		h.Caps &^= CapRemoteCQData
		q.notes = append(q.notes, "remote CQ data requested: kept only providers with cq_data_size > 0")
		q.keep = func(i *Info) bool { return i.CQDataSize > 0 }
	}
	if strings.EqualFold(h.Provider, "tcp") && h.EPType == EPRDM {
		h.Provider = "tcp;ofi_rxm"
		q.notes = append(q.notes, "tcp is MSG-only in libfabric 1.17: using tcp;ofi_rxm for RDM")
	}
	if h.MsgOrder&^OrderSAS != 0 && (h.Provider == "" || strings.HasPrefix(h.Provider, "shm")) {
		// shm grants only SAS unless the hints carry another ordering bit;
		// with one it grants every ordering (and drops FI_MR_VIRT_ADDR, so
		// remote addresses become offsets: MR.RemoteAddr handles that).
		h.MsgOrder |= OrderRMAWAW
	}
	return q
}
