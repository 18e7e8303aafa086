package endpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// TestStats: every kind of send counts once, with its payload bytes,
// under the destination process's rank and the transport it took —
// Isend and Send (eager and rendezvous), Issend, IsendBatch (ring
// appends and a message too large for them), typed sends (contiguous,
// packed small, large blocks), parts, a persistent send started twice
// (contiguous and not), a partitioned send; ProcNull and failed sends
// do not count; the counters survive the handles' Free and the world's
// Close, which writes them where WEFT_STATS says (WithStatsDir). A world
// without WithStats counts nothing.
func TestStats(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		w, ctx := singletonWorld(t, endpoint.WithProvider("shm"))
		eps, err := w.Comm().CreateEndpoints(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eps[0].Isend(make([]byte, 8), 1, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := eps[1].Recv(ctx, make([]byte, 8), 0, 1); err != nil {
			t.Fatal(err)
		}
		if st := w.Stats(); st.Sent.Messages != 0 || len(st.Peers) != 0 {
			t.Errorf("a world without WithStats counted %+v", st)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		// Stats from another goroutine while a private and a shared
		// endpoint send (the race detector's run checks the counters).
		w, ctx := singletonWorld(t, endpoint.WithProvider("shm"), endpoint.WithStats())
		stop := make(chan struct{})
		read := make(chan uint64)
		go func() {
			var last uint64
			for {
				select {
				case <-stop:
					read <- last
					return
				default:
				}
				st := w.Stats()
				if st.Sent.Messages < last {
					t.Errorf("count went back from %d to %d", last, st.Sent.Messages)
				}
				last = st.Sent.Messages
			}
		}()
		const n = 500
		var want uint64
		for _, shared := range []bool{false, true} {
			eps, err := w.Comm().CreateEndpoints(ctx, 2, endpoint.Shared(shared))
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if _, err := eps[0].Isend(make([]byte, 8), 1, i); err != nil {
					t.Fatal(err)
				}
				if _, err := eps[1].Recv(ctx, make([]byte, 8), 0, i); err != nil {
					t.Fatal(err)
				}
			}
			want += n
		}
		close(stop)
		<-read
		if got := w.Stats().Sent.Messages; got != want {
			t.Errorf("sent %d, want %d", got, want)
		}
	})
	t.Run("bad-dir", func(t *testing.T) {
		w, _ := singletonWorld(t, endpoint.WithProvider("shm"), endpoint.WithStatsDir(filepath.Join(t.TempDir(), "missing")))
		if err := w.Close(); err == nil || !strings.Contains(err.Error(), endpoint.EnvStats) {
			t.Errorf("Close with a stats directory that does not exist: %v", err)
		}
	})
	for _, tc := range []struct {
		name string
		opts []endpoint.Option
	}{
		{"native", nil},
		{"native-shared", []endpoint.Option{endpoint.Shared(true)}},
		{"fabric", []endpoint.Option{endpoint.WithNodeTransport(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, ctx := singletonWorld(t, endpoint.WithProvider("shm"), endpoint.WithStatsDir(dir))
			base := w.Stats()
			eps, err := w.Comm().CreateEndpoints(ctx, 2, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			a, b := eps[0], eps[1]
			transport, err := a.Transport(1) // node, unless WEFT_NODE_TRANSPORT=fabric or WithNodeTransport(false)
			if err != nil {
				t.Fatal(err)
			}
			msgs, bytes, err := statsTraffic(ctx, a, b)
			if err != nil {
				t.Fatal(err)
			}
			a.Free()
			b.Free()
			st := w.Stats()
			if st.Rank != 0 || st.Size != 1 || st.Host == "" {
				t.Errorf("stats of rank %d of %d on %q", st.Rank, st.Size, st.Host)
			}
			want := endpoint.Traffic{Messages: base.Sent.Messages + msgs, Bytes: base.Sent.Bytes + bytes}
			if st.Sent != want {
				t.Errorf("sent %+v, want %+v", st.Sent, want)
			}
			var peer endpoint.Traffic
			for _, p := range st.Peers {
				if p.Rank != 0 {
					t.Errorf("traffic to rank %d of a one-rank job", p.Rank)
				}
				if p.Transport == transport {
					peer = p.Traffic
				}
			}
			if peer.Messages < msgs || peer.Bytes < bytes {
				t.Errorf("through %s: %+v, want at least %d messages, %d bytes (peers %+v)", transport, peer, msgs, bytes, st.Peers)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(dir, "weft-stats.0.json"))
			if err != nil {
				t.Fatal(err)
			}
			var file endpoint.Stats
			if err := json.Unmarshal(raw, &file); err != nil {
				t.Fatal(err)
			}
			if file.Sent != want || len(file.Peers) != len(st.Peers) {
				t.Errorf("file: %+v, want %+v", file, st)
			}
		})
	}
}

// statsTraffic sends from a to b one message of each kind (and some
// that must not count), receives them all, and returns how many count
// and their bytes.
func statsTraffic(ctx context.Context, a, b *endpoint.Comm) (msgs, bytes uint64, err error) {
	col, err := ddt.Vector(64, 1, 4, ddt.Float64) // 512 packed bytes, every 4th float64
	if err == nil {
		err = col.Commit()
	}
	if err != nil {
		return 0, 0, err
	}
	big, err := ddt.Vector(8, 4096, 8192, ddt.Float64) // 8 blocks of 32 KiB
	if err == nil {
		err = big.Commit()
	}
	if err != nil {
		return 0, 0, err
	}
	colBuf, bigBuf := make([]byte, 64*4*8), make([]byte, 8*8192*8)
	type recv struct {
		n     int
		typed *ddt.Type
	}
	var recvs []recv // what b receives, in order (tag 1 throughout)
	sent := func(n int) {
		msgs++
		bytes += uint64(n)
		recvs = append(recvs, recv{n: n})
	}
	sentTyped := func(t *ddt.Type, n int) {
		msgs++
		bytes += uint64(n)
		recvs = append(recvs, recv{n: n, typed: t})
	}
	done := make(chan error, 1)
	var total int
	go func() {
		done <- func() error {
			for i := 0; ; i++ {
				st, err := b.Probe(ctx, endpoint.AnySource, 1)
				if err != nil {
					return err
				}
				if st.Count < 0 {
					return fmt.Errorf("probe %d: %+v", i, st)
				}
				if _, err := b.Recv(ctx, make([]byte, st.Count), 0, 1); err != nil {
					return err
				}
				total++
				if st.Count == 7 { // the last message
					return nil
				}
			}
		}()
	}()
	send := func(err error) error { return err }
	wait := func(r *endpoint.Request, err error) error {
		if err != nil {
			return err
		}
		_, err = r.Wait(ctx)
		return err
	}
	steps := []func() error{
		func() error { sent(8); return wait(a.Isend(make([]byte, 8), 1, 1)) },
		func() error { sent(100 << 10); return send(a.Send(ctx, make([]byte, 100<<10), 1, 1)) },
		func() error { sent(10); return send(a.Ssend(ctx, make([]byte, 10), 1, 1)) },
		func() error {
			ms := []endpoint.Msg{{Buf: make([]byte, 16), Dest: 1, Tag: 1}, {Buf: make([]byte, 24), Dest: 1, Tag: 1},
				{Buf: make([]byte, 64<<10), Dest: 1, Tag: 1}, {Buf: make([]byte, 4), Dest: endpoint.ProcNull, Tag: 1}}
			sent(16)
			sent(24)
			sent(64 << 10)
			rs, err := a.IsendBatch(nil, ms)
			if err != nil {
				return err
			}
			return endpoint.WaitAll(ctx, rs...)
		},
		func() error {
			sentTyped(ddt.Byte, 300)
			return send(a.SendTyped(ctx, make([]byte, 300), 300, ddt.Byte, 1, 1))
		},
		func() error { sentTyped(col, 512); return send(a.SendTyped(ctx, colBuf, 1, col, 1, 1)) },
		func() error { sentTyped(big, 256<<10); return send(a.SendTyped(ctx, bigBuf, 1, big, 1, 1)) },
		func() error {
			sentTyped(nil, 512+40)
			return send(a.SendParts(ctx, []endpoint.Part{{Buf: colBuf, Count: 1, Type: col}, {Buf: make([]byte, 40), Count: 40, Type: ddt.Byte}}, 1, 1))
		},
		func() error {
			for _, tc := range []struct {
				t      *ddt.Type
				buf    []byte
				n      int
				packed int
			}{{ddt.Byte, make([]byte, 200), 200, 200}, {col, colBuf, 1, 512}} {
				p, err := a.SendInit(tc.buf, tc.n, tc.t, 1, 1)
				if err != nil {
					return err
				}
				for range 2 {
					sentTyped(tc.t, tc.packed)
					if err := wait(p.Start()); err != nil {
						return err
					}
				}
				if err := p.Free(); err != nil {
					return err
				}
			}
			return nil
		},
		// not counted: ProcNull, a bad rank, a bad tag
		func() error { return wait(a.Isend(make([]byte, 8), endpoint.ProcNull, 1)) },
		func() error {
			if _, err := a.Isend(make([]byte, 8), 5, 1); err == nil {
				return fmt.Errorf("send to rank 5 of 2 started")
			}
			if _, err := a.Isend(make([]byte, 8), 1, -3); err == nil {
				return fmt.Errorf("send with tag -3 started")
			}
			return nil
		},
		func() error { sent(7); return send(a.Send(ctx, make([]byte, 7), 1, 1)) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return 0, 0, fmt.Errorf("step %d: %w", i, err)
		}
	}
	if err := <-done; err != nil {
		return 0, 0, fmt.Errorf("receiver: %w", err)
	}
	if total != len(recvs) {
		return 0, 0, fmt.Errorf("received %d messages, sent %d", total, len(recvs))
	}
	// A partitioned send: one message a round, counted at Start.
	pb := make([]byte, 4096)
	ps, err := a.PsendInit(pb, 4, 1, 2)
	if err != nil {
		return 0, 0, err
	}
	pr, err := b.PrecvInit(make([]byte, 4096), 4, 0, 2)
	if err != nil {
		return 0, 0, err
	}
	if err := pr.Start(); err != nil {
		return 0, 0, err
	}
	if err := ps.Start(); err != nil {
		return 0, 0, err
	}
	msgs++
	bytes += 4096
	if err := ps.PreadyRange(0, 3); err != nil {
		return 0, 0, err
	}
	errs := make(chan error, 1)
	go func() { errs <- pr.Wait(ctx) }()
	if err := ps.Wait(ctx); err != nil {
		return 0, 0, err
	}
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	ps.Free()
	pr.Free()
	return msgs, bytes, nil
}

type testSection struct{ n int }

func (s *testSection) Snapshot() any { return map[string]int{"n": s.n} }

type otherSection struct{}

func (otherSection) Snapshot() any { return nil }

// TestStatsSection: a layer's section is made once per world and written
// under "layers" at Close; another type under the same name, or a world
// that does not count, gets none.
func TestStatsSection(t *testing.T) {
	off, _ := singletonWorld(t, endpoint.WithProvider("shm"))
	if s, ok := endpoint.StatsSection(off, "x", func() *testSection { return &testSection{} }); ok || s != nil {
		t.Errorf("a world that does not count gave a section: %v %v", s, ok)
	}
	dir := t.TempDir()
	w, _ := singletonWorld(t, endpoint.WithProvider("shm"), endpoint.WithStatsDir(dir))
	a, ok := endpoint.StatsSection(w, "x", func() *testSection { return &testSection{} })
	b, ok2 := endpoint.StatsSection(w, "x", func() *testSection { return &testSection{} })
	if !ok || !ok2 || a != b {
		t.Fatalf("two calls gave %p %v and %p %v, want one section", a, ok, b, ok2)
	}
	if _, ok := endpoint.StatsSection(w, "x", func() otherSection { return otherSection{} }); ok {
		t.Error("a section of another type under the same name was given")
	}
	a.n = 7
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "weft-stats.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Layers map[string]map[string]int }
	if err := json.Unmarshal(raw, &f); err != nil || f.Layers["x"]["n"] != 7 {
		t.Errorf("file %s (%v): want layers.x.n = 7", raw, err)
	}
}
