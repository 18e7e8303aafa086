package fabric

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/weft-hpc/weft/internal/testenv"
)

func TestRMAWriteRead(t *testing.T) {
	cases := []struct {
		name string
		h    Hints
	}{
		{"shm", Hints{Provider: "shm", Caps: CapMsg | CapRMA}},
		{"shm-ordered", Hints{Provider: "shm", Caps: CapMsg | CapRMA, MsgOrder: OrderWAW | OrderSAW}},
		{"tcp;ofi_rxm", Hints{Provider: "tcp;ofi_rxm", Caps: CapMsg | CapRMA}},
		{"sockets", Hints{Provider: "sockets", Caps: CapMsg | CapRMA}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, tc.h)
			t.Logf("%s", p.info)
			if tc.name == "shm-ordered" && !p.info.MsgOrder.Has(OrderWAW|OrderSAW) {
				t.Errorf("shm with ordering hints granted %s", p.info.MsgOrder)
			}
			// Target: a registered Go slice; source: an Alloc'd buffer.
			target := make([]byte, 8192)
			mr, err := p.dom.Register(target, AccessRemoteWrite|AccessRemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			src, err := p.dom.Alloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			for i := range src.Bytes() {
				src.Bytes()[i] = byte(i * 7)
			}
			win := target[1000:5096]
			raddr := mr.RemoteAddr(win)
			retry(t, func() error {
				return p.a.ep.Write(src.Bytes(), src.Desc(), p.a.addr[1], raddr, mr.Key(), 11)
			}, p.a.cq, p.b.cq)
			c := mustComp(t, p.a.cq, p.b.cq)
			if c.Context != 11 || c.Flags&CompRMA == 0 || c.Flags&CompWrite == 0 {
				t.Errorf("write completion %+v", c)
			}
			// The initiator's completion may precede remote visibility on
			// manual-progress providers: drive the target until it lands.
			waitFor(t, func() bool { return bytes.Equal(win, src.Bytes()) }, p.b.cq, p.a.cq)
			if target[999] != 0 || target[5096] != 0 {
				t.Error("write spilled outside its window")
			}
			// Read it back into another Alloc'd buffer.
			dst, err := p.dom.Alloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			retry(t, func() error {
				return p.a.ep.Read(dst.Bytes(), dst.Desc(), p.a.addr[1], raddr, mr.Key(), 12)
			}, p.a.cq, p.b.cq)
			c = mustComp(t, p.a.cq, p.b.cq)
			if c.Context != 12 || c.Flags&CompRead == 0 {
				t.Errorf("read completion %+v", c)
			}
			if !bytes.Equal(dst.Bytes(), src.Bytes()) {
				t.Error("read data differs")
			}
			// InjectWrite of a small value.
			small := []byte("inject!")
			retry(t, func() error {
				return p.a.ep.InjectWrite(small, p.a.addr[1], mr.RemoteAddr(target[:len(small)]), mr.Key())
			}, p.a.cq, p.b.cq)
			waitFor(t, func() bool { return bytes.Equal(target[:len(small)], small) }, p.b.cq, p.a.cq)
			// WriteMsg with delivery-complete semantics.
			retry(t, func() error {
				return p.a.ep.WriteMsg(src.Bytes()[:64], src.Desc(), p.a.addr[1], mr.RemoteAddr(target[6000:6064]), mr.Key(), 13, OpDeliveryComplete|OpCompletion)
			}, p.a.cq, p.b.cq)
			c = mustComp(t, p.a.cq, p.b.cq)
			if c.Context != 13 {
				t.Errorf("writemsg completion %+v", c)
			}
			waitFor(t, func() bool { return bytes.Equal(target[6000:6064], src.Bytes()[:64]) }, p.b.cq, p.a.cq)
			// A bad key is an error (immediate or as an error completion), never a crash.
			err = p.a.ep.Write(src.Bytes()[:8], src.Desc(), p.a.addr[1], raddr, mr.Key()+12345, 14)
			if err == nil {
				_, err = waitComp(t, p.a.cq, p.b.cq)
			}
			// Providers with QuirkNoRemoteKeyCheck (shm, tcp;ofi_rxm) write
			// to the address whatever the key.
			if err == nil && p.info.Quirks&QuirkNoRemoteKeyCheck == 0 {
				t.Errorf("write with a bad key succeeded on %s", tc.h.Provider)
			}
			t.Logf("bad key: %v", err)
		})
	}
}

func TestWriteDataRemoteCQData(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapRMA | CapRemoteCQData})
			if !p.info.SupportsRemoteCQData() {
				t.Fatalf("GetInfo with CapRemoteCQData returned cq_data_size 0")
			}
			target := make([]byte, 256)
			mr, err := p.dom.Register(target, AccessRemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			src, err := p.dom.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			copy(src.Bytes(), "remote cq data payload")
			retry(t, func() error {
				return p.a.ep.WriteData(src.Bytes(), src.Desc(), 0xfeedbeef, p.a.addr[1], mr.RemoteAddr(target[:64]), mr.Key(), 21)
			}, p.a.cq, p.b.cq)
			c := mustComp(t, p.b.cq, p.a.cq)
			if c.Flags&CompRemoteCQData == 0 || c.Data != 0xfeedbeef {
				t.Errorf("target completion %+v: want remote CQ data 0xfeedbeef", c)
			}
			if !bytes.Equal(target[:64], src.Bytes()) {
				t.Error("data not written before the remote completion")
			}
			if c := mustComp(t, p.a.cq, p.b.cq); c.Context != 21 {
				t.Errorf("initiator completion %+v", c)
			}
			// SendData: data arrives with the receive.
			rbuf := pinned(t, make([]byte, 16))
			hi := pinned(t, []byte("hi"))
			retry(t, func() error { return p.b.ep.Recv(rbuf, 0, AddrUnspec, 31) }, p.b.cq, p.a.cq)
			retry(t, func() error { return p.a.ep.SendData(hi, 0, 77, p.a.addr[1], 32) }, p.a.cq, p.b.cq)
			c = mustComp(t, p.b.cq, p.a.cq)
			if c.Context != 31 || c.Data != 77 || c.Flags&CompRemoteCQData == 0 || c.Len != 2 {
				t.Errorf("senddata receive %+v", c)
			}
			mustComp(t, p.a.cq, p.b.cq)
		})
	}
}

func TestAtomics(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapRMA | CapAtomic})
			if !p.info.HasCaps(CapAtomic) {
				t.Fatalf("atomics hinted but not granted: %s", p.info)
			}
			if _, err := p.a.ep.FetchAtomicValid(Uint64, OpSum); err != nil {
				testenv.Skip(t, "atomic-fetch-add-u64:"+prov, "%s: fetch-add on uint64 not supported: %v", prov, err)
			}
			t.Logf("granted order with atomics: %s; notes %v", p.info.MsgOrder, p.info.Notes)
			target, err := p.dom.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			defer target.Close()
			binary.LittleEndian.PutUint64(target.Bytes(), 100)
			loc, err := p.dom.Alloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer loc.Close()
			operand, result, compare := loc.Bytes()[0:8], loc.Bytes()[8:16], loc.Bytes()[16:24]
			raddr := target.MR().RemoteAddr(target.Bytes()[:8])
			key := target.MR().Key()
			binary.LittleEndian.PutUint64(operand, 5)
			retry(t, func() error {
				return p.a.ep.FetchAtomic(operand, loc.Desc(), result, loc.Desc(), Uint64, OpSum, p.a.addr[1], raddr, key, 41)
			}, p.a.cq, p.b.cq)
			if c := mustComp(t, p.a.cq, p.b.cq); c.Context != 41 {
				t.Errorf("fetch-add completion %+v", c)
			}
			if got := binary.LittleEndian.Uint64(result); got != 100 {
				t.Errorf("fetch-add returned %d, want 100", got)
			}
			// Compare-swap: 105 -> 7 succeeds, then 105 -> 9 fails.
			binary.LittleEndian.PutUint64(compare, 105)
			binary.LittleEndian.PutUint64(operand, 7)
			retry(t, func() error {
				return p.a.ep.CompareAtomic(operand, loc.Desc(), compare, loc.Desc(), result, loc.Desc(), Uint64, OpCswap, p.a.addr[1], raddr, key, 42)
			}, p.a.cq, p.b.cq)
			mustComp(t, p.a.cq, p.b.cq)
			if got := binary.LittleEndian.Uint64(result); got != 105 {
				t.Errorf("cswap returned old %d, want 105", got)
			}
			binary.LittleEndian.PutUint64(operand, 9)
			retry(t, func() error {
				return p.a.ep.CompareAtomic(operand, loc.Desc(), compare, loc.Desc(), result, loc.Desc(), Uint64, OpCswap, p.a.addr[1], raddr, key, 43)
			}, p.a.cq, p.b.cq)
			mustComp(t, p.a.cq, p.b.cq)
			if got := binary.LittleEndian.Uint64(result); got != 7 {
				t.Errorf("failed cswap returned old %d, want 7", got)
			}
			// Non-fetching atomic add, then check the target directly.
			binary.LittleEndian.PutUint64(operand, 3)
			retry(t, func() error {
				return p.a.ep.Atomic(operand, loc.Desc(), Uint64, OpSum, p.a.addr[1], raddr, key, 44)
			}, p.a.cq, p.b.cq)
			mustComp(t, p.a.cq, p.b.cq)
			waitFor(t, func() bool { return binary.LittleEndian.Uint64(target.Bytes()) == 10 }, p.b.cq, p.a.cq)
			// AtomicMsg with delivery complete: applied once it completes.
			binary.LittleEndian.PutUint64(operand, 4)
			retry(t, func() error {
				return p.a.ep.AtomicMsg(operand, loc.Desc(), Uint64, OpSum, p.a.addr[1], raddr, key, 46, OpDeliveryComplete|OpCompletion)
			}, p.a.cq, p.b.cq)
			if c := mustComp(t, p.a.cq, p.b.cq); c.Context != 46 {
				t.Errorf("atomicmsg completion %+v", c)
			}
			waitFor(t, func() bool { return binary.LittleEndian.Uint64(target.Bytes()) == 14 }, p.b.cq, p.a.cq)
			// InjectAtomic: no completion; visible after target progress.
			inj := []byte{1, 0, 0, 0, 0, 0, 0, 0}
			retry(t, func() error { return p.a.ep.InjectAtomic(inj, Uint64, OpSum, p.a.addr[1], raddr, key) }, p.a.cq, p.b.cq)
			waitFor(t, func() bool { return binary.LittleEndian.Uint64(target.Bytes()) == 15 }, p.b.cq, p.a.cq)
			// Bad lengths are rejected before C.
			if err := p.a.ep.Atomic(operand[:5], loc.Desc(), Uint64, OpSum, p.a.addr[1], raddr, key, 45); !errors.Is(err, ErrInvalid) {
				t.Errorf("5-byte uint64 atomic: %v", err)
			}
		})
	}
}

func TestAtomicNotGranted(t *testing.T) {
	p := newPair(t, Hints{Provider: "tcp;ofi_rxm", Caps: CapMsg | CapRMA})
	if p.info.HasCaps(CapAtomic) {
		t.Fatalf("rxm granted atomics without the hint: %s", p.info)
	}
	if _, err := p.a.ep.AtomicValid(Uint64, OpSum); !errors.Is(err, ErrNotSupported) {
		t.Errorf("AtomicValid without atomics: %v, want ErrNotSupported", err)
	}
}

func TestRxmAtomicsDropOrdering(t *testing.T) {
	infos, err := GetInfo(&Hints{Provider: "tcp;ofi_rxm", Caps: CapMsg | CapRMA | CapAtomic, MsgOrder: OrderWAW | OrderSAW})
	skipNoProvider(t, "tcp;ofi_rxm", err)
	i := infos[0]
	if !i.HasCaps(CapAtomic) {
		t.Fatalf("no atomics: %s", i)
	}
	if i.Quirks&QuirkAtomicsDropOrdering == 0 {
		t.Errorf("QuirkAtomicsDropOrdering not reported: %s", i)
	}
	if i.MsgOrder.Has(OrderWAW) {
		t.Errorf("rxm now grants WAW with atomics (%s): drop QuirkAtomicsDropOrdering", i.MsgOrder)
	}
	if len(i.Notes) == 0 {
		t.Errorf("expected a note about dropped ordering, got none: %s", i)
	}
	t.Logf("%s", i)
}
