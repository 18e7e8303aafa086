package fabric

import (
	"bytes"
	"errors"
	"testing"

	"github.com/weft-hpc/weft/internal/testenv"
)

func TestVectored(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapTagged | CapRMA})
			if p.info.IOVLimit < 2 {
				testenv.Skip(t, "iov:"+prov, "%s: iov limit %d, fewer than 2", prov, p.info.IOVLimit)
			}
			src, err := p.dom.Alloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			dst, err := p.dom.Alloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			copy(src.Bytes(), "hello, vectored world")
			s, d := src.Bytes(), dst.Bytes()
			// Gather 3 pieces, scatter into 2.
			retry(t, func() error {
				return p.b.ep.TRecvV([]IOV{{d[100:105], dst.Desc()}, {d[200:300], dst.Desc()}}, AddrUnspec, 3, 0, 1)
			}, p.b.cq, p.a.cq)
			retry(t, func() error {
				return p.a.ep.TSendV([]IOV{{s[0:7], src.Desc()}, {s[7:15], src.Desc()}, {s[15:21], src.Desc()}}, p.a.addr[1], 3, 2)
			}, p.a.cq, p.b.cq)
			c := mustComp(t, p.b.cq, p.a.cq)
			if c.Len != 21 || string(d[100:105]) != "hello" || string(d[200:216]) != ", vectored world" {
				t.Errorf("tagged vector: %+v %q %q", c, d[100:105], d[200:216])
			}
			mustComp(t, p.a.cq, p.b.cq)
			// Untagged vector.
			retry(t, func() error { return p.b.ep.RecvV([]IOV{{d[0:10], dst.Desc()}, {d[10:30], dst.Desc()}}, AddrUnspec, 3) }, p.b.cq, p.a.cq)
			retry(t, func() error { return p.a.ep.SendV([]IOV{{s[0:5], src.Desc()}, {s[5:21], src.Desc()}}, p.a.addr[1], 4) }, p.a.cq, p.b.cq)
			if c := mustComp(t, p.b.cq, p.a.cq); c.Len != 21 || !bytes.Equal(d[:21], s[:21]) {
				t.Errorf("vector: %+v %q", c, d[:21])
			}
			mustComp(t, p.a.cq, p.b.cq)
			// RMA: gather two pieces into one remote range, read back scattered.
			target := make([]byte, 64)
			mr, err := p.dom.Register(target, AccessRemoteWrite|AccessRemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			retry(t, func() error {
				return p.a.ep.WriteV([]IOV{{s[0:5], src.Desc()}, {s[15:21], src.Desc()}}, p.a.addr[1], mr.RemoteAddr(target[8:19]), mr.Key(), 5)
			}, p.a.cq, p.b.cq)
			mustComp(t, p.a.cq, p.b.cq)
			waitFor(t, func() bool { return string(target[8:19]) == "helloworld"[:5]+" world" }, p.b.cq, p.a.cq)
			retry(t, func() error {
				return p.a.ep.ReadV([]IOV{{d[1000:1005], dst.Desc()}, {d[2000:2006], dst.Desc()}}, p.a.addr[1], mr.RemoteAddr(target[8:19]), mr.Key(), 6)
			}, p.a.cq, p.b.cq)
			mustComp(t, p.a.cq, p.b.cq)
			if string(d[1000:1005]) != "hello" || string(d[2000:2006]) != " world" {
				t.Errorf("readv: %q %q", d[1000:1005], d[2000:2006])
			}
			// Too many segments, none: ErrInvalid before C.
			many := make([]IOV, MaxIOV+1)
			for i := range many {
				many[i] = IOV{s[i : i+1], src.Desc()}
			}
			if err := p.a.ep.SendV(many, p.a.addr[1], 7); !errors.Is(err, ErrInvalid) {
				t.Errorf("SendV of %d segments: %v", len(many), err)
			}
			if err := p.a.ep.SendV(nil, p.a.addr[1], 7); !errors.Is(err, ErrInvalid) {
				t.Errorf("SendV of no segments: %v", err)
			}
			t.Logf("iov limit %d", p.info.IOVLimit)
		})
	}
}
