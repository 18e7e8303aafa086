package endpoint

import "fmt"

// Every message this package sends is an untagged libfabric message whose
// 64-bit remote CQ data is a match word (in match-header mode, on
// providers with less CQ data, its first 8 bytes are: matchhdr.go):
//
//	bit  63      ctrl: internal control message (rendezvous FIN); bits 61..0
//	             then carry the sender's rendezvous sequence number
//	bit  62      rts: the payload is a rendezvous header, not user data
//	bits 61..48  match context (14 bits): a communicator's context id times
//	             four, plus 0 for point-to-point, 1 for its collective twin,
//	             2 and 3 for partitioned messages (their handshakes and
//	             their partitions: partitioned.go)
//	bits 47..42  destination slot (6 bits): which handle of a shared endpoint
//	             the message is for; always 0 on private endpoints
//	bits 41..22  source rank in the communicator (20 bits)
//	bits 21..0   user tag (22 bits, 0..TagUB)
//
// Matching (context, source, tag, AnySource/AnyTag as ignore masks) is done
// by this package on each endpoint's own posted and unexpected queues, not
// by libfabric's tagged matching: libfabric 1.17's shm provider ignores the
// ignore mask when a receive meets an already-arrived (unexpected) tagged
// message, which breaks AnySource/AnyTag (see docs/endpoint.md). Untagged
// receives into the endpoint's bounce buffers match any message in arrival
// order on every provider, so MPI's non-overtaking order follows from the
// provider's FI_ORDER_SAS.
const (
	tagBits    = 22
	srcBits    = 20
	slotBits   = 6
	ctxBits    = 14
	tagShift   = 0
	srcShift   = tagShift + tagBits
	slotShift  = srcShift + srcBits
	ctxShift   = slotShift + slotBits
	rtsBit     = uint64(1) << 62
	ctrlBit    = uint64(1) << 63
	tagMask    = (uint64(1) << tagBits) - 1
	srcMask    = (uint64(1) << srcBits) - 1
	slotMask   = (uint64(1) << slotBits) - 1
	ctxMask    = (uint64(1) << ctxBits) - 1
	ctrlSeqMax = (uint64(1) << 62) - 1

	// TagUB is the largest user tag.
	TagUB = int(tagMask)
	// MaxRanks is the largest communicator size the match word can address.
	MaxRanks = int(srcMask) + 1
	// MaxSharedHandles is the most handles CreateEndpoints returns in shared mode.
	MaxSharedHandles = int(slotMask) + 1
	// ctxPerID is the number of match contexts of one communicator.
	ctxPerID = 4
	// maxContexts is the number of communicator context ids.
	maxContexts = int(ctxMask+1) / ctxPerID
)

// AnySource matches a message from any rank; AnyTag matches any tag.
// ProcNull is the null peer (MPI_PROC_NULL): a send to it and a receive
// from it complete at once and move nothing (the receive's Status has
// Source ProcNull, Tag AnyTag, Count 0); probing it finds such a message
// at once. Topologies use it for the neighbour past a non-periodic border.
const (
	AnySource = -1
	AnyTag    = -1
	ProcNull  = -2
)

// packTag builds the match word of a user (or collective) message.
func packTag(ctx uint16, slot uint8, src int, tag int) uint64 {
	return uint64(ctx)&ctxMask<<ctxShift |
		uint64(slot)&slotMask<<slotShift |
		uint64(src)&srcMask<<srcShift |
		uint64(tag)&tagMask<<tagShift
}

// matchBits returns the match word and ignore mask of a receive. The rts bit
// is always ignored (an eager message and a rendezvous header both match);
// the ctrl bit never is.
func matchBits(ctx uint16, slot uint8, src int, tag int) (want, ignore uint64) {
	ignore = rtsBit
	if src == AnySource {
		ignore |= srcMask << srcShift
		src = 0
	}
	if tag == AnyTag {
		ignore |= tagMask << tagShift
		tag = 0
	}
	return packTag(ctx, slot, src, tag), ignore
}

// tagMatches reports whether match word t satisfies the receive (want, ignore).
func tagMatches(t, want, ignore uint64) bool { return (t^want)&^ignore == 0 }

func tagSource(t uint64) int  { return int(t >> srcShift & srcMask) }
func tagUser(t uint64) int    { return int(t >> tagShift & tagMask) }
func tagCtx(t uint64) uint16  { return uint16(t >> ctxShift & ctxMask) }
func tagSlot(t uint64) uint8  { return uint8(t >> slotShift & slotMask) }
func tagIsRTS(t uint64) bool  { return t&rtsBit != 0 }
func tagIsCtrl(t uint64) bool { return t&ctrlBit != 0 }
func ctrlSeq(t uint64) uint64 { return t & ctrlSeqMax }

// ctrlTag is the match word of the FIN that completes rendezvous send seq.
func ctrlTag(seq uint64) uint64 { return ctrlBit | seq&ctrlSeqMax }

func checkTag(tag int, wildcardOK bool) error {
	if tag >= 0 && tag <= TagUB || tag == AnyTag && wildcardOK {
		return nil
	}
	return badTag(tag)
}

func badTag(tag int) error {
	return fmt.Errorf("endpoint: tag %d outside 0..%d: %w", tag, TagUB, ErrInvalid)
}
