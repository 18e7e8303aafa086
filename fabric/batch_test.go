package fabric

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/internal/testenv"
)

// batchProviders are the providers the batch tests run on.
var batchProviders = []string{"shm", "tcp;ofi_rxm"}

// postAll posts ops with PostBatch, re-posting the rest after ErrAgain
// while driving progress on cqs.
func postAll(t testing.TB, ep *Endpoint, ops []Op, cqs ...*CQ) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(ops) > 0 {
		n, err := ep.PostBatch(ops)
		if n < 0 || n > len(ops) {
			t.Fatalf("PostBatch posted %d of %d", n, len(ops))
		}
		ops = ops[n:]
		if err == nil {
			return
		}
		if !errors.Is(err, ErrAgain) || time.Now().After(deadline) {
			t.Fatalf("PostBatch: %v", err)
		}
		for _, c := range cqs {
			drain(c)
		}
	}
}

// readOne waits for one completion on cq with PostAndRead (no ops),
// driving progress on others.
func readOne(t testing.TB, ep *Endpoint, cq *CQ, others ...*CQ) Completion {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var out [1]Completion
	for {
		if q := backlog[cq]; len(q) > 0 { // read by drain while driving progress
			backlog[cq] = q[1:]
			if q[0].err != nil {
				t.Fatal(q[0].err)
			}
			return q[0].c
		}
		posted, n, err := ep.PostAndRead(nil, cq, out[:], 200)
		if err != nil || posted != 0 {
			t.Fatalf("PostAndRead(nil): posted %d, err %v", posted, err)
		}
		if n == 1 {
			return out[0]
		}
		for _, o := range others {
			drain(o)
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for a completion")
		}
	}
}

// TestBatchRoundTrip runs tagged ping-pongs where every step is one batch:
// the receive for the next message and the reply go to C together, and the
// reply's sender waits with PostAndRead. Contents are checked every time.
func TestBatchRoundTrip(t *testing.T) {
	for _, prov := range batchProviders {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapTagged})
			const size = 32
			bufA, err := p.dom.Alloc(2 * size)
			if err != nil {
				t.Fatal(err)
			}
			bufB, err := p.dom.Alloc(2 * size)
			if err != nil {
				t.Fatal(err)
			}
			aRx, aTx := bufA.Bytes()[:size], bufA.Bytes()[size:]
			bRx, bTx := bufB.Bytes()[:size], bufB.Bytes()[size:]
			const tagPing, tagPong, ctxA, ctxB = 1, 2, 10, 20
			postAll(t, p.b.ep, []Op{TRecvOp(bRx, bufB.Desc(), AddrUnspec, tagPing, 0, ctxB)}, p.b.cq)
			for i := 0; i < 50; i++ {
				ping := fmt.Sprintf("ping %d", i)
				clear(aTx)
				copy(aTx, ping)
				// a: receive for the pong and the ping in one crossing.
				postAll(t, p.a.ep, []Op{
					TRecvOp(aRx, bufA.Desc(), AddrUnspec, tagPong, 0, ctxA),
					TInjectOp(aTx[:len(ping)], p.a.addr[1], tagPing),
				}, p.a.cq, p.b.cq)
				c := readOne(t, p.b.ep, p.b.cq, p.a.cq)
				if c.Context != ctxB || c.Tag != tagPing || c.Len != len(ping) || string(bRx[:c.Len]) != ping {
					t.Fatalf("iteration %d: b got %+v %q", i, c, bRx[:c.Len])
				}
				// b: next receive and the pong in one crossing, then
				// reading its CQ in the same call (nothing is due).
				pong := fmt.Sprintf("pong %d", i)
				clear(bTx)
				copy(bTx, pong)
				ops := []Op{
					TRecvOp(bRx, bufB.Desc(), AddrUnspec, tagPing, 0, ctxB),
					TInjectOp(bTx[:len(pong)], p.b.addr[0], tagPong),
				}
				var out [4]Completion
				for len(ops) > 0 {
					posted, n, err := p.b.ep.PostAndRead(ops, p.b.cq, out[:], 1)
					if n != 0 {
						t.Fatalf("b: unexpected completions %+v", out[:n])
					}
					ops = ops[posted:]
					if err != nil && !errors.Is(err, ErrAgain) {
						t.Fatal(err)
					}
					drain(p.a.cq)
				}
				c = readOne(t, p.a.ep, p.a.cq, p.b.cq)
				if c.Context != ctxA || c.Tag != tagPong || string(aRx[:c.Len]) != pong {
					t.Fatalf("iteration %d: a got %+v %q", i, c, aRx[:c.Len])
				}
			}
			// The receive posted last is still pending: cancel it.
			if err := p.b.ep.Cancel(ctxB); err != nil {
				t.Fatal(err)
			}
			if _, err := waitComp(t, p.b.cq); !errors.Is(err, ErrCanceled) {
				t.Fatalf("cancel: %v", err)
			}
		})
	}
}

// TestPostAndReadReturnsCompletion: a message already sent is matched by a
// receive posted with PostAndRead, whose read returns its completion.
func TestPostAndReadReturnsCompletion(t *testing.T) {
	for _, prov := range batchProviders {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg})
			buf, err := p.dom.Alloc(128)
			if err != nil {
				t.Fatal(err)
			}
			msg, rx := buf.Bytes()[:64], buf.Bytes()[64:]
			copy(msg, "already on its way")
			retry(t, func() error { return p.a.ep.Inject(msg[:18], p.a.addr[1]) }, p.a.cq, p.b.cq)
			ops := []Op{RecvOp(rx, buf.Desc(), AddrUnspec, 77)}
			var out [8]Completion
			calls := 0
			deadline := time.Now().Add(10 * time.Second)
			for {
				calls++
				posted, n, err := p.b.ep.PostAndRead(ops, p.b.cq, out[:], 100000)
				if err != nil && !errors.Is(err, ErrAgain) {
					t.Fatal(err)
				}
				ops = ops[posted:]
				if n > 0 {
					if len(ops) != 0 || n != 1 {
						t.Fatalf("posted %d, %d completions %+v", posted, n, out[:n])
					}
					c := out[0]
					if c.Context != 77 || c.Flags&CompRecv == 0 || c.Len != 18 || string(rx[:18]) != "already on its way" {
						t.Fatalf("completion %+v, data %q", c, rx[:18])
					}
					break
				}
				drain(p.a.cq)
				if time.Now().After(deadline) {
					t.Fatal("no completion")
				}
			}
			t.Logf("%s: completion after %d PostAndRead call(s)", prov, calls)
		})
	}
}

// TestBatchWriteThenFlag posts a data write and a flag write in one batch
// where write-after-write ordering is granted, and checks on every
// iteration that the target never sees the flag before the data. The flag
// goes alternately as an inject write and as a WriteMsg (delivery
// complete); the target waits for it with CQ.WaitWord.
func TestBatchWriteThenFlag(t *testing.T) {
	for _, prov := range batchProviders {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapRMA, MsgOrder: OrderWAW})
			if !p.info.MsgOrder.Has(OrderWAW) {
				testenv.Skip(t, "fi-order-waw:"+prov, "%s did not grant FI_ORDER_WAW (granted %s): the flag may overtake the data", prov, p.info.MsgOrder)
			}
			const dataLen = 64 << 10
			target, err := p.dom.Alloc(dataLen + 64)
			if err != nil {
				t.Fatal(err)
			}
			tb := target.Bytes()
			flag := (*uint64)(unsafe.Pointer(&tb[0]))
			data := tb[64 : 64+dataLen]
			src, err := p.dom.Alloc(dataLen + 64)
			if err != nil {
				t.Fatal(err)
			}
			sData, sFlag := src.Bytes()[64:64+dataLen], src.Bytes()[:8]
			mr := target.MR()
			var out [8]Completion
			const iters = 100
			for i := uint64(1); i <= iters; i++ {
				for j := range sData {
					sData[j] = byte(i)
				}
				binary.LittleEndian.PutUint64(sFlag, i)
				fl := InjectWriteOp(sFlag, p.a.addr[1], mr.RemoteAddr(tb[:8]), mr.Key())
				want := 1 // completions due to a: the data write
				if i%2 == 0 {
					fl = WriteMsgOp(sFlag, src.Desc(), 0, p.a.addr[1], mr.RemoteAddr(tb[:8]), mr.Key(), 1000+i, OpDeliveryComplete)
					want = 2
				}
				postAll(t, p.a.ep, []Op{WriteOp(sData, src.Desc(), p.a.addr[1], mr.RemoteAddr(data), mr.Key(), i), fl}, p.a.cq, p.b.cq)
				deadline := time.Now().Add(10 * time.Second)
				got := 0
				for {
					reached, n, err := p.b.cq.WaitWord(flag, i, out[:], 1000)
					if err != nil {
						t.Fatal(err)
					}
					if n != 0 {
						t.Fatalf("target CQ yielded %+v", out[:n])
					}
					if reached {
						break
					}
					n, err = p.a.cq.Read(out[:])
					if err != nil {
						t.Fatal(err)
					}
					got += n
					if time.Now().After(deadline) {
						t.Fatalf("iteration %d: flag %d never reached", i, *flag)
					}
				}
				// The flag says i: every data byte must already be i.
				if k := bytes.IndexFunc(data, func(r rune) bool { return r != rune(byte(i)) }); k >= 0 {
					t.Fatalf("iteration %d: flag seen before data (data[%d] = %d)", i, k, data[k])
				}
				for got < want { // the source is reused next iteration
					c := readOne(t, p.a.ep, p.a.cq, p.b.cq)
					if c.Context != i && c.Context != 1000+i {
						t.Fatalf("completion %+v in iteration %d", c, i)
					}
					got++
				}
			}
		})
	}
}

// TestWaitWord: a remote inject write of a flag is observed by WaitWord on
// the target; completions and the spin limit end the wait too.
func TestWaitWord(t *testing.T) {
	for _, prov := range batchProviders {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapRMA})
			target, err := p.dom.Alloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			word := (*uint64)(unsafe.Pointer(&target.Bytes()[8]))
			src, err := p.dom.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			var out [4]Completion
			// Not reached, nothing queued: the rounds run out.
			if r, n, err := p.b.cq.WaitWord(word, 1, out[:], 50); r || n != 0 || err != nil {
				t.Fatalf("idle WaitWord = %v, %d, %v", r, n, err)
			}
			// Already reached: returns at once.
			if r, n, err := p.b.cq.WaitWord(word, 0, out[:], 1<<30); !r || n != 0 || err != nil {
				t.Fatalf("WaitWord(want 0) = %v, %d, %v", r, n, err)
			}
			// A remote flag write.
			binary.LittleEndian.PutUint64(src.Bytes(), 7)
			raddr := target.MR().RemoteAddr(target.Bytes()[8:16])
			retry(t, func() error {
				return p.a.ep.InjectWrite(src.Bytes()[:8], p.a.addr[1], raddr, target.MR().Key())
			}, p.a.cq, p.b.cq)
			deadline := time.Now().Add(10 * time.Second)
			for {
				r, n, err := p.b.cq.WaitWord(word, 7, out[:], 10000)
				if err != nil || n != 0 {
					t.Fatalf("WaitWord: %d completions, %v", n, err)
				}
				if r {
					break
				}
				drain(p.a.cq) // tcp;ofi_rxm: the initiator must progress too
				if time.Now().After(deadline) {
					t.Fatalf("flag still %d", *word)
				}
			}
			if *word != 7 {
				t.Fatalf("word = %d", *word)
			}
			// A completion ends the wait before the word is reached.
			rx := target.Bytes()[1024:1088]
			retry(t, func() error { return p.b.ep.Recv(rx, target.Desc(), AddrUnspec, 55) }, p.b.cq)
			copy(src.Bytes()[8:], "wake")
			retry(t, func() error { return p.a.ep.Inject(src.Bytes()[8:12], p.a.addr[1]) }, p.a.cq, p.b.cq)
			for {
				r, n, err := p.b.cq.WaitWord(word, 100, out[:], 10000)
				if err != nil || r {
					t.Fatalf("WaitWord(100) = %v, %v", r, err)
				}
				if n > 0 {
					if n != 1 || out[0].Context != 55 || string(rx[:4]) != "wake" {
						t.Fatalf("completions %+v", out[:n])
					}
					break
				}
				drain(p.a.cq)
				if time.Now().After(deadline) {
					t.Fatal("receive never completed")
				}
			}
			// Bad arguments.
			if _, _, err := p.b.cq.WaitWord(nil, 1, out[:], 1); !errors.Is(err, ErrInvalid) {
				t.Errorf("nil word: %v", err)
			}
			odd := (*uint64)(unsafe.Pointer(&target.Bytes()[12]))
			if _, _, err := p.b.cq.WaitWord(odd, 1, out[:], 1); !errors.Is(err, ErrInvalid) {
				t.Errorf("misaligned word: %v", err)
			}
		})
	}
}

// TestPostBatchPartialAgain fills a queue so that a batch is cut short
// with ErrAgain, then re-posts the rest: every message must arrive exactly
// once and in order, which proves the reported count was exact. On shm the
// transmit side fills (inject into a peer that does not progress); on
// tcp;ofi_rxm, which buffers injects without limit here, the receive side
// does (more receives than rx_size).
func TestPostBatchPartialAgain(t *testing.T) {
	for _, prov := range batchProviders {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg})
			const N = 3000
			src, err := p.dom.Alloc(8 * N)
			if err != nil {
				t.Fatal(err)
			}
			dst, err := p.dom.Alloc(8 * N)
			if err != nil {
				t.Fatal(err)
			}
			sends := make([]Op, N)
			recvs := make([]Op, N)
			for i := range sends {
				binary.LittleEndian.PutUint64(src.Bytes()[8*i:], uint64(i)+1)
				sends[i] = InjectOp(src.Bytes()[8*i:8*i+8], p.a.addr[1])
				recvs[i] = RecvOp(dst.Bytes()[8*i:8*i+8], dst.Desc(), AddrUnspec, uint64(i))
			}
			// Connect first: the first message to a peer sets up the
			// connection and may report EAGAIN for reasons of its own.
			warm := dst.Bytes()[:8]
			retry(t, func() error { return p.b.ep.Recv(warm, dst.Desc(), AddrUnspec, 1<<40) }, p.b.cq)
			retry(t, func() error { return p.a.ep.Inject(src.Bytes()[:8], p.a.addr[1]) }, p.a.cq, p.b.cq)
			if c := mustComp(t, p.b.cq, p.a.cq); c.Context != 1<<40 {
				t.Fatalf("warm-up completion %+v", c)
			}
			sent, rposted, got := 0, 0, 0
			var first string
			if prov == "shm" {
				n, err := p.a.ep.PostBatch(sends)
				if !errors.Is(err, ErrAgain) || n <= 0 || n >= N {
					t.Fatalf("first inject batch: posted %d of %d, err %v (want a partial post and ErrAgain)", n, N, err)
				}
				sent, first = n, fmt.Sprintf("injects: posted %d of %d, %v", n, N, err)
			} else {
				n, err := p.b.ep.PostBatch(recvs)
				if !errors.Is(err, ErrAgain) || n <= 0 || n >= N {
					t.Fatalf("first receive batch: posted %d of %d, err %v (want a partial post and ErrAgain)", n, N, err)
				}
				rposted, first = n, fmt.Sprintf("receives: posted %d of %d, %v", n, N, err)
			}
			t.Log(first)
			var out [64]Completion
			deadline := time.Now().Add(20 * time.Second)
			for got < N {
				if rposted < N && rposted-got < 512 { // shm: at most rx_size receives
					n, err := p.b.ep.PostBatch(recvs[rposted:min(N, got+512)])
					if err != nil && !errors.Is(err, ErrAgain) {
						t.Fatal(err)
					}
					rposted += n
				}
				if sent < N {
					n, err := p.a.ep.PostBatch(sends[sent:])
					if err != nil && !errors.Is(err, ErrAgain) {
						t.Fatal(err)
					}
					sent += n
				}
				n, err := p.b.cq.Read(out[:])
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range out[:n] {
					if c.Context != uint64(got) {
						t.Fatalf("receive %d completed as number %d", c.Context, got)
					}
					got++
				}
				p.a.cq.Read(nil)
				if time.Now().After(deadline) {
					t.Fatalf("stuck: sent %d, receives posted %d, received %d", sent, rposted, got)
				}
			}
			for i := 0; i < N; i++ {
				if v := binary.LittleEndian.Uint64(dst.Bytes()[8*i:]); v != uint64(i)+1 {
					t.Fatalf("slot %d holds message %d", i, v)
				}
			}
		})
	}
}

// unpinnedSink keeps unpinnedBuf on the Go heap.
var unpinnedSink []byte

// TestBatchErrors covers the refusals: closed endpoint and CQ, empty
// batch, unknown kinds, oversized injects, nil buffers, the "outside"
// remote address, and (with cgo checking on) an unpinned Go buffer.
func TestBatchErrors(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg | CapTagged | CapRMA})
	buf, err := p.dom.Alloc(2 * p.info.InjectSize)
	if err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	var out [4]Completion
	okRecv := RecvOp(b[:8], buf.Desc(), AddrUnspec, 1)
	cases := []struct {
		name string
		ops  []Op
	}{
		{"empty", nil},
		{"kind 0", []Op{okRecv, {Kind: 0}}},
		{"kind 99", []Op{okRecv, {Kind: 99, Buf: ptr(b), Len: 8}}},
		{"inject too large", []Op{okRecv, InjectOp(b[:p.info.InjectSize+1], p.a.addr[1])}},
		{"tinject too large", []Op{TInjectOp(b[:p.info.InjectSize+1], p.a.addr[1], 3)}},
		{"inject write too large", []Op{InjectWriteOp(b[:p.info.InjectSize+1], p.a.addr[1], 0, 0)}},
		{"writemsg inject too large", []Op{WriteMsgOp(b[:p.info.InjectSize+1], 0, 0, p.a.addr[1], 0, 0, 0, OpInject)}},
		{"nil buf", []Op{{Kind: OpKindSend, Len: 8}}},
		{"outside raddr", []Op{WriteOp(b[:8], buf.Desc(), p.a.addr[1], ^uint64(0), 0, 1)}},
	}
	for _, tc := range cases {
		n, err := p.a.ep.PostBatch(tc.ops)
		if n != 0 || !errors.Is(err, ErrInvalid) {
			t.Errorf("PostBatch(%s) = %d, %v; want 0 and ErrInvalid", tc.name, n, err)
		}
		if tc.ops == nil {
			continue // an empty PostAndRead is a plain read
		}
		posted, m, err := p.a.ep.PostAndRead(tc.ops, p.a.cq, out[:], 1)
		if posted != 0 || m != 0 || !errors.Is(err, ErrInvalid) {
			t.Errorf("PostAndRead(%s) = %d, %d, %v; want 0, 0, ErrInvalid", tc.name, posted, m, err)
		}
	}
	// Nothing was posted by the refused batches (not even the valid
	// receive in front of a bad op): the CQ stays empty.
	if n, err := p.a.cq.ReadSpin(out[:], 100); n != 0 || err != nil {
		t.Errorf("refused batches left completions: %d %+v %v", n, out[:n], err)
	}
	if OpKindTInject.String() != "TInject" || OpKind(99).String() != "OpKind(99)" {
		t.Errorf("OpKind names: %v, %v", OpKindTInject, OpKind(99))
	}
	if _, _, err := p.a.ep.PostAndRead(nil, nil, out[:], 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil CQ: %v", err)
	}
	// An unpinned Go buffer inside an Op: the cgo checker must refuse it.
	if !strings.Contains(os.Getenv("GODEBUG"), "cgocheck=0") {
		unpinnedSink = make([]byte, 64)
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "unpinned Go") {
					t.Errorf("unpinned Go buffer: recovered %v, want the cgo pointer check", r)
				}
			}()
			p.a.ep.PostBatch([]Op{InjectOp(unpinnedSink[:8], p.a.addr[1])})
		}()
	}
	// Closed CQ, then closed endpoint.
	cq2, err := p.dom.OpenCQ(8)
	if err != nil {
		t.Fatal(err)
	}
	cq2.Close()
	if _, _, err := p.a.ep.PostAndRead([]Op{okRecv}, cq2, out[:], 1); !errors.Is(err, ErrClosed) {
		t.Errorf("closed CQ: %v", err)
	}
	if _, _, err := cq2.WaitWord((*uint64)(unsafe.Pointer(&b[0])), 1, out[:], 1); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitWord on closed CQ: %v", err)
	}
	p.a.ep.Close()
	if n, err := p.a.ep.PostBatch([]Op{okRecv}); n != 0 || !errors.Is(err, ErrClosed) {
		t.Errorf("closed endpoint: %d, %v", n, err)
	}
	if posted, n, err := p.a.ep.PostAndRead([]Op{okRecv}, p.a.cq, out[:], 1); posted != 0 || n != 0 || !errors.Is(err, ErrClosed) {
		t.Errorf("PostAndRead on closed endpoint: %d, %d, %v", posted, n, err)
	}
}

// TestBatchPinnedGoMemory: Go memory pinned by the caller is accepted in an
// Op (a receive into a pinned slice, filled by a batch from the peer).
func TestBatchPinnedGoMemory(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg})
	rx := pinned(t, make([]byte, 64))
	tx := pinned(t, []byte("pinned go memory"))
	postAll(t, p.b.ep, []Op{RecvOp(rx, 0, AddrUnspec, 9)}, p.b.cq)
	postAll(t, p.a.ep, []Op{InjectOp(tx, p.a.addr[1])}, p.a.cq, p.b.cq)
	c := readOne(t, p.b.ep, p.b.cq, p.a.cq)
	if c.Context != 9 || string(rx[:c.Len]) != "pinned go memory" {
		t.Fatalf("%+v %q", c, rx[:c.Len])
	}
}
