package fabric

import "strings"

// Quirk is a known provider behaviour that differs from the libfabric
// specification or from other providers, as found in libfabric 1.17 and
// checked by this package's tests. Info.Quirks lists those of the chosen
// provider so that callers can route around them.
type Quirk uint32

// Known quirks.
const (
	// QuirkUnexpectedIgnoreMask: a tagged receive with a non-zero ignore
	// mask never matches a message that arrived before it was posted (the
	// provider's unexpected queue compares tags exactly). shm.
	QuirkUnexpectedIgnoreMask Quirk = 1 << iota
	// QuirkNoRemoteKeyCheck: RMA and atomics are not checked against the
	// target's keys and registered ranges; a wrong key or address is not
	// reported (and a wild address can crash the target). shm, tcp;ofi_rxm.
	QuirkNoRemoteKeyCheck
	// QuirkTruncOlenZero: truncation errors report CQError.Olen = 0.
	// shm, tcp;ofi_rxm.
	QuirkTruncOlenZero
	// QuirkAtomicsDropOrdering: with atomics the provider grants no
	// RAR/RAW/WAW/SAW message ordering. ofi_rxm.
	QuirkAtomicsDropOrdering
	// QuirkSlowWhenOversubscribed: progress threads make the provider very
	// slow when CPUs are oversubscribed. sockets.
	QuirkSlowWhenOversubscribed
)

var quirkNames = []struct {
	q Quirk
	n string
}{
	{QuirkUnexpectedIgnoreMask, "unexpected_ignore_mask"},
	{QuirkNoRemoteKeyCheck, "no_remote_key_check"},
	{QuirkTruncOlenZero, "trunc_olen_zero"},
	{QuirkAtomicsDropOrdering, "atomics_drop_ordering"},
	{QuirkSlowWhenOversubscribed, "slow_when_oversubscribed"},
}

// String names the value (or the set bits).
func (q Quirk) String() string {
	var s []string
	for _, n := range quirkNames {
		if q&n.q != 0 {
			s = append(s, n.n)
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "|")
}

// quirksOf returns the known quirks of a provider (name as in Info.Provider).
func quirksOf(prov string, caps Caps) Quirk {
	var q Quirk
	switch {
	case prov == "shm":
		q |= QuirkNoRemoteKeyCheck | QuirkTruncOlenZero
		if caps&CapTagged != 0 {
			q |= QuirkUnexpectedIgnoreMask
		}
	case strings.HasSuffix(prov, ";ofi_rxm"):
		if strings.HasPrefix(prov, "tcp") {
			q |= QuirkNoRemoteKeyCheck | QuirkTruncOlenZero
		}
		if caps&CapAtomic != 0 {
			q |= QuirkAtomicsDropOrdering
		}
	case prov == "sockets":
		q |= QuirkSlowWhenOversubscribed
	}
	return q
}

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
