package onesided

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/weft-hpc/weft/fabric"
)

// peerRecord is what each rank of a window's libfabric path tells the
// others when the path is set up (one Allgather).
//
// Wire format, little-endian:
//
//	0   region key        8 bytes
//	8   region base       8 bytes (remote address of the region's byte 0)
//	16  control key       8 bytes
//	24  control base      8 bytes
//	32  provider length   1 byte (1..255)
//	33  flags             1 byte (bit 0: takes signals in CQ data)
//	34  region length     8 bytes (registered, page-rounded)
//	42  process key       8 bytes (procpeers.go)
//	50  path number       8 bytes (procpeers.go)
//	58  provider name, then the endpoint name (the rest, at least 1 byte)
type peerRecord struct {
	key, base   uint64 // the registered region
	ckey, cbase uint64 // the control words
	cqSink      bool   // takes signals in remote CQ data
	regionLen   uint64
	procKey     uint64
	pathSeq     uint64
	provider    string
	name        []byte // endpoint name (fabric address)
}

const (
	peerHeader     = 58
	peerFlagCQSink = 1 << 0
	peerFlagsKnown = peerFlagCQSink
)

// check validates r's values: what UnmarshalBinary accepts and
// MarshalBinary writes.
func (r *peerRecord) check() error {
	switch {
	case len(r.provider) == 0 || len(r.provider) > math.MaxUint8:
		return fmt.Errorf("onesided: peer record: provider name of %d bytes (want 1..255): %w", len(r.provider), ErrInvalid)
	case len(r.name) == 0:
		return fmt.Errorf("onesided: peer record: empty endpoint name: %w", ErrInvalid)
	case r.regionLen > math.MaxInt || r.base > math.MaxUint64-r.regionLen:
		return fmt.Errorf("onesided: peer record: region of %d bytes at %#x does not fit the address space: %w", r.regionLen, r.base, ErrInvalid)
	case r.cbase > math.MaxUint64-ctrlBytes:
		return fmt.Errorf("onesided: peer record: control words at %#x do not fit the address space: %w", r.cbase, ErrInvalid)
	case r.cqSink && (r.regionLen < 8 || fabric.SignalSlotBits(int(r.regionLen)) > fabric.MaxSignalSlotBits):
		return fmt.Errorf("onesided: peer record: a region of %d bytes cannot take signals in CQ data: %w", r.regionLen, ErrInvalid)
	}
	for _, c := range []byte(r.provider) {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("onesided: peer record: provider name %q is not printable ASCII: %w", r.provider, ErrInvalid)
		}
	}
	return nil
}

// MarshalBinary encodes r (see peerRecord), after checking its values.
func (r *peerRecord) MarshalBinary() ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	b := make([]byte, peerHeader, peerHeader+len(r.provider)+len(r.name))
	binary.LittleEndian.PutUint64(b[0:], r.key)
	binary.LittleEndian.PutUint64(b[8:], r.base)
	binary.LittleEndian.PutUint64(b[16:], r.ckey)
	binary.LittleEndian.PutUint64(b[24:], r.cbase)
	b[32] = byte(len(r.provider))
	if r.cqSink {
		b[33] = peerFlagCQSink
	}
	binary.LittleEndian.PutUint64(b[34:], r.regionLen)
	binary.LittleEndian.PutUint64(b[42:], r.procKey)
	binary.LittleEndian.PutUint64(b[50:], r.pathSeq)
	b = append(b, r.provider...)
	return append(b, r.name...), nil
}

// UnmarshalBinary decodes a record made by MarshalBinary. Short input,
// unknown flags and values MarshalBinary would refuse fail with an error
// wrapping ErrInvalid; r is then unchanged. The endpoint name is copied.
func (r *peerRecord) UnmarshalBinary(b []byte) error {
	if len(b) < peerHeader {
		return fmt.Errorf("onesided: peer record of %d bytes, shorter than its %d-byte header: %w", len(b), peerHeader, ErrInvalid)
	}
	plen := int(b[32])
	if len(b) < peerHeader+plen {
		return fmt.Errorf("onesided: peer record of %d bytes cut inside its %d-byte provider name: %w", len(b), plen, ErrInvalid)
	}
	if fl := b[33]; fl&^peerFlagsKnown != 0 {
		return fmt.Errorf("onesided: peer record: unknown flags %#x: %w", fl, ErrInvalid)
	}
	v := peerRecord{
		key:       binary.LittleEndian.Uint64(b[0:]),
		base:      binary.LittleEndian.Uint64(b[8:]),
		ckey:      binary.LittleEndian.Uint64(b[16:]),
		cbase:     binary.LittleEndian.Uint64(b[24:]),
		cqSink:    b[33]&peerFlagCQSink != 0,
		regionLen: binary.LittleEndian.Uint64(b[34:]),
		procKey:   binary.LittleEndian.Uint64(b[42:]),
		pathSeq:   binary.LittleEndian.Uint64(b[50:]),
		provider:  string(b[peerHeader : peerHeader+plen]),
		name:      append([]byte(nil), b[peerHeader+plen:]...),
	}
	if err := v.check(); err != nil {
		return err
	}
	*r = v
	return nil
}
