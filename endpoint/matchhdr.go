package endpoint

// Match-header mode. The match word normally travels as the message's
// 64-bit remote CQ data. A provider that grants fewer than 8 bytes of CQ
// data (verbs;ofi_rxm: verbs immediate data is 32 bits) cannot carry it,
// so on such a provider, or when WEFT_TUNE's epmatchhdr forces it, every
// libfabric message of an endpoint starts with the match word instead, as
// an 8-byte little-endian header in front of the payload (eager data, a
// rendezvous header or a FIN). Sends then use fi_inject/fi_send without
// CQ data, and the receive side reads the word from the bounce buffer
// before matching. The node transport is not concerned: it carries the
// match word in its own cells. The mode is per job: every rank uses the
// same provider (checked at Init) and the same epmatchhdr (checked with
// the address records), so every rank frames messages alike.

import (
	"encoding/binary"

	"github.com/weft-hpc/weft/fabric"
)

// matchHdrSize is the size of the match header.
const matchHdrSize = 8

// forceMatchHdr is WEFT_TUNE's epmatchhdr (tests of one process may set it
// before Init).
var forceMatchHdr = tune.EPMatchHdr

// matchHeader reports whether endpoints on the provider info carry the
// match word in a header.
func matchHeader(info *fabric.Info) bool {
	return forceMatchHdr || info.CQDataSize < 8
}

// hdrLen is the number of header bytes in front of each of v's libfabric
// messages (0 or matchHdrSize).
func (v *vci) hdrLen() int {
	if v.hdr {
		return matchHdrSize
	}
	return 0
}

func putMatchHeader(b []byte, t uint64) { binary.LittleEndian.PutUint64(b, t) }

// withMatchHeader returns a new buffer holding the match header t and a
// copy of buf.
func withMatchHeader(t uint64, buf []byte) []byte {
	b := make([]byte, matchHdrSize+len(buf))
	putMatchHeader(b, t)
	copy(b[matchHdrSize:], buf)
	return b
}

// injectData injects buf with match word t: as remote CQ data, or in
// match-header mode as a header built in v.hdrBuf (fi_inject copies it
// before returning). len(buf) is at most v.injectLimit, or 8 for a FIN.
func (v *vci) injectData(buf []byte, t uint64, dest fabric.Addr) error {
	if v.hdr {
		return v.injectHdr(buf, t, dest)
	}
	return v.ep.InjectData(buf, t, dest)
}

func (v *vci) injectHdr(buf []byte, t uint64, dest fabric.Addr) error {
	b := v.hdrBuf[:matchHdrSize+len(buf)]
	putMatchHeader(b, t)
	copy(b[matchHdrSize:], buf)
	return v.ep.Inject(b, dest)
}

// incomingHdr handles a message that arrived in match-header mode.
func (v *vci) incomingHdr(msg []byte) {
	if len(msg) < matchHdrSize {
		v.log.Error("incoming message without its match header lost (is WEFT_TUNE's epmatchhdr the same on every rank?)", "len", len(msg))
		return
	}
	v.incoming(binary.LittleEndian.Uint64(msg), msg[matchHdrSize:])
}

// recHdrFlag marks, in the eager-limit word of a rank's address record,
// that the rank forces match-header mode.
const recHdrFlag = uint32(1) << 31

func hdrFlag() uint32 {
	if forceMatchHdr {
		return recHdrFlag
	}
	return 0
}
