package fabric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

func TestAVOrderLookupRemove(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg})
	na, _ := p.a.ep.Name()
	nb, _ := p.b.ep.Name()
	if p.a.addr[0] != 0 || p.a.addr[1] != 1 || p.b.addr[0] != 0 || p.b.addr[1] != 1 {
		t.Errorf("same insert order gave %v and %v", p.a.addr, p.b.addr)
	}
	for i, want := range [][]byte{na, nb} {
		got, err := p.a.av.Lookup(Addr(i))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bytes.TrimRight(got, "\x00"), bytes.TrimRight(want, "\x00")) {
			t.Errorf("Lookup(%d) = %q, want %q", i, got, want)
		}
	}
	if err := p.a.av.Remove(p.a.addr[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := p.a.av.Lookup(p.a.addr[1]); err == nil {
		t.Error("Lookup after Remove succeeded")
	}
}

func TestCancelRecv(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapTagged})
			buf := pinned(t, make([]byte, 64))
			retry(t, func() error { return p.b.ep.TRecv(buf, 0, AddrUnspec, 99, 0, 555) }, p.b.cq)
			if err := p.b.ep.Cancel(555); err != nil {
				t.Fatal(err)
			}
			_, err := waitComp(t, p.b.cq)
			var ce *CQError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCanceled) || ce.Context != 555 {
				t.Fatalf("after Cancel: %v, want a canceled CQError for ctx 555", err)
			}
		})
	}
}

func TestCounter(t *testing.T) {
	infos, err := GetInfo(&Hints{Provider: "shm", Caps: CapMsg | CapRMA})
	skipNoProvider(t, "shm", err)
	info := infos[0]
	fab, err := OpenFabric(info)
	if err != nil {
		t.Fatal(err)
	}
	defer fab.Close()
	dom, err := fab.OpenDomain(info)
	if err != nil {
		t.Fatal(err)
	}
	cnt, err := dom.OpenCounter()
	if err != nil {
		t.Fatal(err)
	}
	var eps [2]*Endpoint
	var cqs [2]*CQ
	var avs [2]*AV
	for i := range eps {
		cqs[i], _ = dom.OpenCQ(64)
		avs[i], _ = dom.OpenAV(2)
		var opts []EndpointOption
		if i == 0 {
			opts = append(opts, WithCounter(cnt, AccessWrite|AccessSend))
		}
		if eps[i], err = dom.OpenEndpoint(info, cqs[i], avs[i], opts...); err != nil {
			t.Fatal(err)
		}
	}
	n1, _ := eps[1].Name()
	ad, err := avs[0].Insert(n1)
	if err != nil {
		t.Fatal(err)
	}
	target := make([]byte, 4096)
	mr, err := dom.Register(target, AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	src, err := dom.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	const writes = 10
	for i := 0; i < writes; i++ {
		retry(t, func() error {
			return eps[0].Write(src.Bytes()[i*8:i*8+8], src.Desc(), ad[0], mr.RemoteAddr(target[i*8:]), mr.Key(), uint64(i))
		}, cqs[0], cqs[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The counter drives progress itself; the target side needs its CQ read.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cqs[1].Read(make([]Completion, 4))
			time.Sleep(time.Millisecond)
		}
	}()
	v, err := cnt.Wait(ctx, writes)
	if err != nil {
		t.Fatalf("counter at %d: %v", v, err)
	}
	if cnt.ReadErr() != 0 {
		t.Errorf("error count %d", cnt.ReadErr())
	}
	if err := cnt.Add(5); err != nil {
		t.Fatal(err)
	}
	if got := cnt.Read(); got != writes+5 {
		t.Errorf("after Add: %d", got)
	}
	if err := cnt.Set(1); err != nil || cnt.Read() != 1 {
		t.Errorf("Set: %v %d", err, cnt.Read())
	}
	cancel()
	<-done
	if err := dom.Close(); err != nil {
		t.Fatal(err)
	}
	if cnt.Read() != 0 || !errors.Is(cnt.Add(1), ErrClosed) {
		t.Error("counter usable after domain close")
	}
}

func TestMRCache(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg | CapRMA})
	setMRCache(p.dom, 2)
	buf := make([]byte, 1<<16)
	m1, err := p.dom.Register(buf, AccessRemoteWrite|AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := p.dom.Register(buf, AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	m3, err := p.dom.Register(buf[100:200], AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	if h, m := p.dom.MRCacheStats(); h != 2 || m != 1 {
		t.Errorf("hits %d misses %d, want 2, 1", h, m)
	}
	if m1.Key() != m2.Key() || m1.Key() != m3.Key() {
		t.Error("cached registrations have different keys")
	}
	if live := LiveObjects()["mr"]; live != 1 {
		t.Errorf("%d live MRs, want 1", live)
	}
	for _, m := range []*MR{m1, m2, m3, m3} { // m3 twice: Close is idempotent
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Released registration stays cached: registering again is a hit.
	m4, err := p.dom.Register(buf, AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	m4.Close()
	if h, _ := p.dom.MRCacheStats(); h != 3 {
		t.Errorf("re-registration after release was not a hit (hits %d)", h)
	}
	// More access than cached forces a new registration; the LRU keeps 2.
	bufs := [][]byte{make([]byte, 4096), make([]byte, 4096), make([]byte, 4096)}
	for _, b := range bufs {
		m, err := p.dom.Register(b, AccessRemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
	}
	if live := LiveObjects()["mr"]; live != 2 {
		t.Errorf("%d live MRs after eviction, want 2", live)
	}
	// The LRU kept the two released last: the last is a hit, the first a
	// miss. A hit and its Close allocate the handle alone.
	h0, m0 := p.dom.MRCacheStats()
	var ferr error
	allocs := testing.AllocsPerRun(100, func() {
		m, err := p.dom.Register(bufs[2], AccessRemoteWrite)
		if err != nil {
			ferr = err
			return
		}
		ferr = m.Close()
	})
	if ferr != nil {
		t.Fatal(ferr)
	}
	if h, m := p.dom.MRCacheStats(); h-h0 != 101 || m != m0 {
		t.Errorf("the registration released last: %d hits, %d misses in 101 registrations", h-h0, m-m0)
	}
	if allocs > 1 {
		t.Errorf("a cached registration and its Close: %.1f allocations, want the handle's alone", allocs)
	}
	// RegisterInto reuses a closed handle: no allocation at all.
	probe, err := p.dom.Register(bufs[2], AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	m2key := probe.Key()
	probe.Close()
	var kept MR
	allocs = testing.AllocsPerRun(100, func() {
		if err := p.dom.RegisterInto(&kept, bufs[2], AccessRemoteWrite); err != nil {
			ferr = err
			return
		}
		if kept.Key() != m2key {
			ferr = fmt.Errorf("RegisterInto gave key %#x, the registration has %#x", kept.Key(), m2key)
		}
		ferr = kept.Close()
	})
	if ferr != nil {
		t.Fatal(ferr)
	}
	if allocs != 0 && !testenv.Race {
		t.Errorf("a cached RegisterInto and its Close: %.1f allocations, want none", allocs)
	}
	if err := p.dom.RegisterInto(&kept, bufs[2], AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	if err := p.dom.RegisterInto(&kept, bufs[2], AccessRemoteWrite); !errors.Is(err, ErrInvalid) {
		t.Errorf("RegisterInto an open handle: %v", err)
	}
	kept.Close()
	if err := p.dom.RegisterInto(nil, bufs[2], AccessRemoteWrite); !errors.Is(err, ErrInvalid) {
		t.Errorf("RegisterInto nil: %v", err)
	}
	owned, err := p.dom.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer owned.Close()
	if err := p.dom.RegisterInto(owned.MR(), bufs[2], AccessRemoteWrite); !errors.Is(err, ErrInvalid) {
		t.Errorf("RegisterInto a Buffer's handle: %v", err)
	}
	m, err := p.dom.Register(bufs[0], AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if _, m := p.dom.MRCacheStats(); m != m0+1 {
		t.Errorf("the registration released first was not evicted (%d misses, want %d)", m, m0+1)
	}
}

func TestAllocBuffer(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg | CapRMA})
	for _, size := range []int{1, 4096, 5000, 2 << 20} {
		b, err := p.dom.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Bytes()) != size {
			t.Errorf("Alloc(%d) has %d bytes", size, len(b.Bytes()))
		}
		if addr := b.MR().RemoteAddr(b.Bytes()); p.info.MRMode&MRVirtAddr != 0 && addr%4096 != 0 {
			t.Errorf("Alloc(%d) not page aligned: %#x", size, addr)
		}
		b.Bytes()[size-1] = 1
		t.Logf("Alloc(%d): huge pages %v", size, b.Huge())
		if err := b.MR().Close(); err != nil { // no-op
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if l := LiveObjects(); l["buffer"] != 0 {
		t.Errorf("buffers still live: %v", l)
	}
}
