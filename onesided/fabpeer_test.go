package onesided

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"
)

func validPeerRecord() peerRecord {
	return peerRecord{key: 7, base: 0x7f0000001000, ckey: 9, cbase: 0x7f0000002000, cqSink: true,
		regionLen: 1 << 16, procKey: 0xdeadbeef, pathSeq: 3, provider: "tcp;ofi_rxm", name: []byte{1, 2, 3, 4}}
}

func TestPeerRecordRoundTrip(t *testing.T) {
	r := validPeerRecord()
	b, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != peerHeader+len(r.provider)+len(r.name) {
		t.Fatalf("record of %d bytes", len(b))
	}
	var got peerRecord
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: got %+v, want %+v", got, r)
	}
	// The decoded name is a copy.
	b[len(b)-1] = 99
	if got.name[len(got.name)-1] != 4 {
		t.Fatal("decoded name aliases the input")
	}
}

// TestPeerRecordInvalid: every malformed record and every value Marshal
// must refuse fails with ErrInvalid, and leaves the target unchanged.
func TestPeerRecordInvalid(t *testing.T) {
	good, err := func() ([]byte, error) { r := validPeerRecord(); return r.MarshalBinary() }()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	bad := map[string][]byte{
		"empty":          nil,
		"short header":   good[:peerHeader-1],
		"cut provider":   good[:peerHeader+3],
		"no name":        good[:peerHeader+len("tcp;ofi_rxm")],
		"unknown flag":   edit(func(b []byte) []byte { b[33] |= 2; return b }),
		"no provider":    edit(func(b []byte) []byte { b[32] = 0; return b }),
		"control byte":   edit(func(b []byte) []byte { b[peerHeader] = 0; return b }),
		"huge region":    edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[34:], math.MaxUint64); return b }),
		"region wraps":   edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], math.MaxUint64-8); return b }),
		"control wraps":  edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[24:], math.MaxUint64-8); return b }),
		"sink, 0 region": edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[34:], 0); return b }),
	}
	for name, b := range bad {
		r := validPeerRecord()
		r.pathSeq = 42
		err := r.UnmarshalBinary(b)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: UnmarshalBinary: %v, want ErrInvalid", name, err)
		}
		if r.pathSeq != 42 {
			t.Errorf("%s: a failed UnmarshalBinary changed the record", name)
		}
	}
	for name, r := range map[string]peerRecord{
		"no provider":   {provider: "", name: []byte{1}},
		"long provider": {provider: string(bytes.Repeat([]byte{'a'}, 256)), name: []byte{1}},
		"no name":       {provider: "shm"},
		"sink, tiny":    {provider: "shm", name: []byte{1}, cqSink: true, regionLen: 4},
		"space":         {provider: "s m", name: []byte{1}},
	} {
		if _, err := r.MarshalBinary(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: MarshalBinary: %v, want ErrInvalid", name, err)
		}
	}
}

// FuzzPeerRecord: UnmarshalBinary never panics; what it accepts
// re-encodes to the same bytes (the format has one encoding per record),
// and a record built from the fuzzer's values that MarshalBinary accepts
// decodes to itself. The seeds run as ordinary tests.
func FuzzPeerRecord(f *testing.F) {
	r := validPeerRecord()
	good, _ := r.MarshalBinary()
	f.Add(good, uint64(1), uint64(2), uint64(4096), "shm", []byte("name"), true)
	f.Add(good[:peerHeader], uint64(0), uint64(math.MaxUint64), uint64(0), "", []byte{}, false)
	f.Add([]byte{}, uint64(math.MaxUint64-ctrlBytes), uint64(0), uint64(math.MaxInt64), "tcp;ofi_rxm", []byte{0}, true)
	f.Fuzz(func(t *testing.T, b []byte, base, cbase, regionLen uint64, prov string, name []byte, sink bool) {
		var d peerRecord
		if err := d.UnmarshalBinary(b); err == nil {
			again, err := d.MarshalBinary()
			if err != nil {
				t.Fatalf("decoded record %+v does not encode: %v", d, err)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("re-encoded %x, decoded from %x", again, b)
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatalf("UnmarshalBinary error does not wrap ErrInvalid: %v", err)
		}
		in := peerRecord{key: base ^ cbase, base: base, ckey: ^cbase, cbase: cbase, cqSink: sink,
			regionLen: regionLen, procKey: regionLen * 3, pathSeq: base + 1, provider: prov, name: name}
		enc, err := in.MarshalBinary()
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("MarshalBinary error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		var out peerRecord
		if err := out.UnmarshalBinary(enc); err != nil {
			t.Fatalf("record %+v encodes but does not decode: %v", in, err)
		}
		if !reflect.DeepEqual(out, in) {
			t.Fatalf("round trip: got %+v, want %+v", out, in)
		}
	})
}
