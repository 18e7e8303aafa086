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
	"fmt"

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

// fabEagerLimit is the largest payload v sends eagerly to a libfabric
// peer: the eager limit less the match header, so that no eager message
// on the wire exceeds the eager limit (ofi_rxm's eager buffer is 16 KiB:
// a larger message would take its rendezvous and could be overtaken by a
// later eager one).
func (v *vci) fabEagerLimit() int { return v.eagerLimit - v.hdrLen() }

func putMatchHeader(b []byte, t uint64) { binary.LittleEndian.PutUint64(b, t) }

// Framed buffers. Every libfabric message of an endpoint is handed to
// the provider by sendFramed or injectFramed (or, for a buffer the
// caller owns, injectData), from a buffer whose first hdrLen() bytes are
// reserved for the match header: send requests' qdata, segment buffers,
// the inject scratch, FIN and CTS arrays. In match-header mode the header
// is written there and the buffer goes without CQ data; otherwise there
// is nothing in front and the word goes as CQ data. So no path copies a
// payload to put a header in front of it.

// sendFramed posts b (registered: desc) with match word t; b starts with
// v.hdrLen() reserved bytes.
func (v *vci) sendFramed(b []byte, desc fabric.Desc, t uint64, dest fabric.Addr, ctx uint64) error {
	if v.hdr {
		putMatchHeader(b, t)
		return v.ep.Send(b, desc, dest, ctx)
	}
	return v.ep.SendData(b, desc, t, dest, ctx)
}

// injectFramed injects b with match word t; b starts with v.hdrLen()
// reserved bytes and is at most the provider's inject size long.
func (v *vci) injectFramed(b []byte, t uint64, dest fabric.Addr) error {
	if v.hdr {
		putMatchHeader(b, t)
		return v.ep.Inject(b, dest)
	}
	return v.ep.InjectData(b, t, dest)
}

// ctrlFrame returns the part of a, an array of matchHdrSize+n bytes,
// that a control message of n payload bytes is injected from (the
// payload starts at v.hdrLen()).
func (v *vci) ctrlFrame(a []byte) []byte { return a[matchHdrSize-v.hdrLen():] }

// injectData injects buf, which has no room reserved (a user's buffer),
// with match word t: as remote CQ data, or in match-header mode with the
// header built in v.hdrBuf (fi_inject copies it before returning).
// len(buf) is at most v.injectLimit.
func (v *vci) injectData(buf []byte, t uint64, dest fabric.Addr) error {
	if v.hdr {
		return v.injectHdr(buf, t, dest)
	}
	return v.ep.InjectData(buf, t, dest)
}

func (v *vci) injectHdr(buf []byte, t uint64, dest fabric.Addr) error {
	b := v.hdrBuf[:matchHdrSize+len(buf)]
	copy(b[matchHdrSize:], buf)
	return v.injectFramed(b, t, dest)
}

// stageEager returns a registered buffer holding buf behind hdrLen()
// reserved bytes, for an eager send in match-header mode: a free segment
// buffer of v (index+1 in seg, 0 when none was free), else one of v's
// reused staging buffers (registered through the MR cache where the
// provider wants descriptors; mr is then that registration).
func (v *vci) stageEager(buf []byte) (b []byte, desc fabric.Desc, seg int, mr *fabric.MR, err error) {
	hl := v.hdrLen()
	if v.ensureSegs() && len(buf) <= v.segSize {
		if idx, ok := v.takeSeg(); ok {
			b = v.segs[idx][:hl+len(buf)]
			copy(b[hl:], buf)
			return b, v.segDesc, idx + 1, nil, nil
		}
	}
	b = v.stage(hl + len(buf))
	copy(b[hl:], buf)
	if v.mrLocal {
		if mr, err = v.dom.Register(b, fabric.AccessSend); err != nil {
			v.unstage(b)
			return nil, 0, 0, nil, fmt.Errorf("endpoint: register send buffer: %w", err)
		}
		desc = mr.Desc()
	}
	return b, desc, 0, mr, nil
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
