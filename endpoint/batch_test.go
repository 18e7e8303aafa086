package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/settings"
)

// batchSizes are message sizes around every protocol boundary of the node
// transport (first cell, ring inline limit, eager limit).
func batchSizes(t *testing.T) []int {
	tu, err := settings.Tune()
	if err != nil {
		t.Fatal(err)
	}
	inline := int(tu.NodeInline)
	return []int{0, 8, 40, 41, inline, inline + 1, 16 << 10, 16<<10 + 1, 100 << 10}
}

// TestIsendBatch: one goroutine drives a sender x and receivers y and z of
// one process, on the node transport and on libfabric. A batch mixes
// messages to y and z of every protocol's sizes with ProcNull entries,
// between ordinary Isends to the same peers; y's receives are posted
// first (expected), z's after (unexpected), all with AnyTag: each peer
// gets its messages complete and in send order, a batch message longer
// than its receive truncates. A batch of more messages than a ring holds
// queues the rest in order. Bad arguments send nothing. Private handles
// on both transports, and the three handles on one shared endpoint.
func TestIsendBatch(t *testing.T) {
	singleton(t)
	sizes := batchSizes(t)
	for _, mode := range []struct {
		native, shared bool
	}{{true, false}, {false, false}, {true, true}} {
		native := mode.native
		t.Run(fmt.Sprintf("native=%v,shared=%v", native, mode.shared), func(t *testing.T) {
			w, ctx := singletonWorld(t, endpoint.WithProvider("shm"))
			eps, err := w.Comm().CreateEndpoints(ctx, 3, endpoint.WithNodeTransport(native), endpoint.Shared(mode.shared))
			if err != nil {
				t.Fatal(err)
			}
			x, y, z := eps[0], eps[1], eps[2]
			want := endpoint.TransportFabric
			if native {
				want = endpoint.TransportNode
			}
			if tr, _ := x.Transport(1); tr != want {
				t.Fatalf("transport %s, want %s", tr, want)
			}

			// The messages, in send order, per destination: tag k is the
			// k-th message to that peer.
			type sent struct {
				dest int
				buf  []byte
			}
			var all []sent
			next := map[int]int{}
			msg := func(dest, size int) endpoint.Msg {
				b := make([]byte, size)
				pattern(b, 0, dest, next[dest])
				all = append(all, sent{dest, b})
				m := endpoint.Msg{Buf: b, Dest: dest, Tag: next[dest]}
				next[dest]++
				return m
			}
			var sends []*endpoint.Request
			isend := func(m endpoint.Msg) {
				r, err := x.Isend(m.Buf, m.Dest, m.Tag)
				if err != nil {
					t.Fatal(err)
				}
				sends = append(sends, r)
			}
			isend(msg(1, 8))
			isend(msg(2, 8))
			var batch []endpoint.Msg
			for i, s := range sizes {
				batch = append(batch, msg(1, s), msg(2, s))
				if i%3 == 0 {
					batch = append(batch, endpoint.Msg{Buf: []byte("nothing"), Dest: endpoint.ProcNull, Tag: 1})
				}
			}
			const truncAt = 3 // z's message with this tag gets a short buffer
			isendAfter := []endpoint.Msg{msg(1, 16), msg(2, 16)}

			// y's receives first, in the order the messages come.
			var recvs []*endpoint.Request
			bufs := map[int][][]byte{}
			post := func(c *endpoint.Comm, dest int) {
				for _, m := range all {
					if m.dest != dest {
						continue
					}
					n := len(m.buf)
					if dest == 2 && len(bufs[dest]) == truncAt {
						n = len(m.buf) - 1
					}
					b := make([]byte, n)
					bufs[dest] = append(bufs[dest], b)
					r, err := c.Irecv(b, endpoint.AnySource, endpoint.AnyTag)
					if err != nil {
						t.Fatal(err)
					}
					recvs = append(recvs, r)
				}
			}
			post(y, 1)
			reqs := make([]*endpoint.Request, 0, 4)
			reqs, err = x.IsendBatch(reqs, batch)
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != len(batch) {
				t.Fatalf("%d requests for %d messages", len(reqs), len(batch))
			}
			for i, m := range batch {
				if m.Dest == endpoint.ProcNull && !reqs[i].Done() {
					t.Fatalf("ProcNull entry %d not complete", i)
				}
			}
			sends = append(sends, reqs...)
			for _, m := range isendAfter {
				isend(m)
			}
			// z's messages arrive before its receives.
			if _, _, err := z.Iprobe(endpoint.AnySource, endpoint.AnyTag); err != nil {
				t.Fatal(err)
			}
			zFirst := len(recvs)
			post(z, 2)
			trunc := recvs[zFirst+truncAt]
			rest := append(append([]*endpoint.Request{}, recvs[:zFirst+truncAt]...), recvs[zFirst+truncAt+1:]...)
			if err := endpoint.WaitAll(ctx, append(rest, sends...)...); err != nil {
				t.Fatal(err)
			}
			st, err := trunc.Wait(ctx)
			if !errors.Is(err, endpoint.ErrTruncated) || st.Tag != truncAt {
				t.Fatalf("short receive: %+v, %v; want tag %d truncated", st, err, truncAt)
			}
			k := map[int]int{}
			for _, m := range all {
				got := bufs[m.dest][k[m.dest]]
				if !bytes.Equal(got, m.buf[:len(got)]) {
					t.Fatalf("message %d to rank %d (%d bytes): wrong data or order", k[m.dest], m.dest, len(m.buf))
				}
				k[m.dest]++
			}
			for i, r := range recvs {
				if r == trunc {
					continue
				}
				st, _ := r.Wait(ctx)
				if st.Source != 0 {
					t.Fatalf("receive %d: source %d", i, st.Source)
				}
			}

			// More messages than a ring holds, the receives posted first.
			const many = 3000
			big := make([]endpoint.Msg, many)
			recvs = recvs[:0]
			got := make([][]byte, many)
			for i := range big {
				b := []byte(fmt.Sprintf("m%07d", i))
				big[i] = endpoint.Msg{Buf: b, Dest: 1, Tag: 7}
				got[i] = make([]byte, len(b))
				r, err := y.Irecv(got[i], 0, 7)
				if err != nil {
					t.Fatal(err)
				}
				recvs = append(recvs, r)
			}
			if reqs, err = x.IsendBatch(reqs[:0], big); err != nil {
				t.Fatal(err)
			}
			if err := endpoint.WaitAll(ctx, append(recvs, reqs...)...); err != nil {
				t.Fatal(err)
			}
			for i := range big {
				if !bytes.Equal(got[i], big[i].Buf) {
					t.Fatalf("message %d of %d arrived as %q (order)", i, many, got[i])
				}
			}

			// Bad arguments: an error naming the message, nothing sent.
			ok := endpoint.Msg{Buf: []byte("x"), Dest: 1, Tag: 9}
			for _, bad := range []endpoint.Msg{
				{Dest: 3, Tag: 9}, {Dest: -5, Tag: 9}, {Dest: endpoint.AnySource, Tag: 9},
				{Dest: 1, Tag: -1}, {Dest: 1, Tag: endpoint.TagUB + 1}, {Dest: 1, Tag: endpoint.AnyTag},
			} {
				before := len(reqs)
				reqs, err = x.IsendBatch(reqs, []endpoint.Msg{ok, ok, bad, ok})
				if !errors.Is(err, endpoint.ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte("message 2")) {
					t.Fatalf("batch with %+v: %v", bad, err)
				}
				if len(reqs) != before {
					t.Fatalf("failed batch appended %d requests", len(reqs)-before)
				}
			}
			if found, _, err := y.Iprobe(endpoint.AnySource, endpoint.AnyTag); found || err != nil {
				t.Fatalf("a rejected batch sent something: %v, %v", found, err)
			}
			if r, err := x.IsendBatch(nil, nil); r != nil || err != nil {
				t.Fatalf("empty batch: %v, %v", r, err)
			}
			var nilComm *endpoint.Comm
			if _, err := nilComm.IsendBatch(nil, []endpoint.Msg{ok}); !errors.Is(err, endpoint.ErrInvalid) {
				t.Fatalf("batch on a nil communicator: %v", err)
			}
			if err := x.Free(); err != nil {
				t.Fatal(err)
			}
			if _, err := x.IsendBatch(nil, []endpoint.Msg{ok}); !errors.Is(err, endpoint.ErrClosed) {
				t.Fatalf("batch on a freed communicator: %v", err)
			}
		})
	}
}

// TestIsendBatchNoAllocs: a window of released receives and one batch of
// 8-byte sends allocates nothing once warm on the node transport.
func TestIsendBatchNoAllocs(t *testing.T) {
	x, y, ctx := singletonPair(t, endpoint.WithNodeTransport(true))
	const window = 64
	batch := make([]endpoint.Msg, window)
	bufs := make([][]byte, window)
	for i := range batch {
		batch[i] = endpoint.Msg{Buf: []byte("12345678"), Dest: 1, Tag: 3}
		bufs[i] = make([]byte, 8)
	}
	recvs := make([]*endpoint.Request, window)
	sends := make([]*endpoint.Request, 0, window)
	var ferr error
	round := func() {
		for i := range recvs {
			var err error
			if recvs[i], err = y.Irecv(bufs[i], 0, 3); err != nil {
				ferr = err
				return
			}
		}
		var err error
		if sends, err = x.IsendBatch(sends[:0], batch); err != nil {
			ferr = err
			return
		}
		if err := endpoint.WaitAll(ctx, recvs...); err != nil {
			ferr = err
			return
		}
		for _, r := range recvs {
			if err := r.Release(); err != nil {
				ferr = err
				return
			}
		}
	}
	round()
	if allocs := testing.AllocsPerRun(100, round); allocs != 0 {
		t.Errorf("%.1f allocations per batch of %d messages, want 0", allocs, window)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	for i, b := range bufs {
		if string(b) != "12345678" {
			t.Fatalf("buffer %d holds %q", i, b)
		}
	}
}

// TestIsendBatchProcesses: 2 processes × 2 endpoints; every endpoint
// sends each other one (in its process and in the other) one batch of
// messages of every protocol's sizes, on the node transport and on
// libfabric shm; the receivers take them with AnyTag from each source in
// turn and check order and content.
func TestIsendBatchProcesses(t *testing.T) {
	sizes := batchSizes(t)
	for _, p := range providers[:2] {
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 2, p, 90*time.Second) {
				return
			}
			w := initWorld(t)
			ctx := eptest.Ctx(t, 60*time.Second)
			eps, err := w.Comm().CreateEndpoints(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			runHandles(t, ctx, eps, func(ctx context.Context, c *endpoint.Comm) error {
				me, n := c.Rank(), c.Size()
				var batch []endpoint.Msg
				for i, s := range sizes {
					for d := 0; d < n; d++ {
						if d == me {
							continue
						}
						b := make([]byte, s)
						pattern(b, me, d, i)
						batch = append(batch, endpoint.Msg{Buf: b, Dest: d, Tag: i})
					}
				}
				sends, err := c.IsendBatch(nil, batch)
				if err != nil {
					return err
				}
				buf := make([]byte, sizes[len(sizes)-1])
				for i := range sizes {
					for src := 0; src < n; src++ {
						if src == me {
							continue
						}
						st, err := c.Recv(ctx, buf, src, endpoint.AnyTag)
						if err != nil {
							return err
						}
						if st.Tag != i || st.Count != sizes[i] {
							return fmt.Errorf("from rank %d: tag %d, %d bytes; want message %d of %d bytes", src, st.Tag, st.Count, i, sizes[i])
						}
						want := make([]byte, st.Count)
						pattern(want, src, me, i)
						if !bytes.Equal(buf[:st.Count], want) {
							return fmt.Errorf("message %d from rank %d corrupted", i, src)
						}
					}
				}
				return endpoint.WaitAll(ctx, sends...)
			})
			for _, e := range eps {
				if err := e.Free(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
