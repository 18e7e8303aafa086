package fabric

import (
	"bytes"
	"testing"
)

// TestWriteMsgFlags exercises fi_writemsg flags: a fenced write on sockets
// (the provider here that grants FI_FENCE) and remote CQ data through
// WriteMsgData with OpRemoteCQData on every provider.
func TestWriteMsgFlags(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			caps := CapMsg | CapRMA | CapRemoteCQData
			if prov == "sockets" {
				caps |= CapFence
			}
			p := newPair(t, Hints{Provider: prov, Caps: caps})
			target := make([]byte, 128)
			mr, err := p.dom.Register(target, AccessRemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			src, err := p.dom.Alloc(128)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			copy(src.Bytes(), bytes.Repeat([]byte("ab"), 64))
			if p.info.HasCaps(CapFence) {
				retry(t, func() error {
					return p.a.ep.Write(src.Bytes()[:64], src.Desc(), p.a.addr[1], mr.RemoteAddr(target[:64]), mr.Key(), 1)
				}, p.a.cq, p.b.cq)
				retry(t, func() error {
					return p.a.ep.WriteMsg(src.Bytes()[64:], src.Desc(), p.a.addr[1], mr.RemoteAddr(target[64:]), mr.Key(), 2, OpFence|OpCompletion)
				}, p.a.cq, p.b.cq)
				got := map[uint64]bool{}
				for len(got) < 2 {
					got[mustComp(t, p.a.cq, p.b.cq).Context] = true
				}
				waitFor(t, func() bool { return bytes.Equal(target, src.Bytes()) }, p.b.cq, p.a.cq)
			}
			retry(t, func() error {
				return p.a.ep.WriteMsgData(src.Bytes()[:16], src.Desc(), 0x5eed, p.a.addr[1], mr.RemoteAddr(target[:16]), mr.Key(), 3, OpRemoteCQData|OpCompletion)
			}, p.a.cq, p.b.cq)
			c := mustComp(t, p.b.cq, p.a.cq)
			if c.Flags&CompRemoteCQData == 0 || c.Data != 0x5eed {
				t.Errorf("target completion %+v", c)
			}
			if c := mustComp(t, p.a.cq, p.b.cq); c.Context != 3 {
				t.Errorf("initiator completion %+v", c)
			}
		})
	}
}
