package am_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/am"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// Handler ids of the scenario.
const (
	hData = iota + 1
	hEcho
	hFail
	hHop
	hNested
	hNoReply
	hUnknown = 77
)

// fill is the payload byte i of message seq from src to dst.
func fill(src, dst, seq, i int) byte { return byte(i*7 + seq*13 + src*29 + dst*3) }

func u32s(v ...int) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func at32(b []byte, i int) int { return int(binary.LittleEndian.Uint32(b[4*i:])) }

// echoOf is what hEcho replies: the payload reversed, then the header.
func echoOf(header, payload []byte) []byte {
	r := slices.Clone(payload)
	slices.Reverse(r)
	return append(r, header...)
}

// sizesFor are payload sizes around an inline limit of inline bytes (8
// bytes of prefix, 8 of header), and large ones.
func sizesFor(inline int, big bool) []int {
	s := []int{0, 1, 100, inline - 16, inline - 15, 3*inline + 1, 64<<10 + 3}
	if big {
		s = append(s, 1<<20)
	}
	return s
}

// scenario is every rank's part of the main test: data messages of every
// size from every rank to every rank (itself too) handled in order, their
// payloads taken three ways (ReadPayload, Payload, or left unread);
// calls with replies, errors, no reply and an unregistered handler; a
// message forwarded from handler to handler around the ring twice; a call
// whose handler calls the next rank (a cycle every rank is in at once);
// then Quiesce, after which every message must have been handled.
func scenario(ctx context.Context, e *am.Engine, inline int, big bool) error {
	me, n := e.Rank(), e.Size()
	sizes := sizesFor(inline, big)
	rounds := 3 * len(sizes)
	next := make([]int, n)    // next data seq expected from each rank
	got := make([]int, n)     // payload bytes checked from each rank
	arrived := make([]int, n) // hop chains ended here, by origin
	var bad []string
	badf := func(f string, a ...any) error {
		bad = append(bad, fmt.Sprintf(f, a...))
		return fmt.Errorf(f, a...)
	}
	check := func(src, seq int, p []byte) error {
		for i, v := range p {
			if w := fill(src, me, seq, i); v != w {
				return badf("data %d from %d: byte %d is %d, want %d", seq, src, i, v, w)
			}
		}
		got[src] += len(p)
		return nil
	}
	reg := map[int]am.Handler{
		hData: func(ctx context.Context, m *am.Msg) error {
			src, h := m.Source(), m.Header()
			if len(h) != 8 || m.IsCall() {
				return badf("data from %d: header %d bytes, call %v", src, len(h), m.IsCall())
			}
			seq, size := at32(h, 0), at32(h, 1)
			if seq != next[src] || m.Len() != size {
				return badf("data from %d: seq %d size %d (Len %d), want seq %d", src, seq, size, m.Len(), next[src])
			}
			next[src]++
			switch (seq / len(sizes)) % 3 {
			case 0:
				dst := make([]byte, size+5)
				k, err := m.ReadPayload(dst)
				if err != nil || k != size {
					return badf("data %d from %d: ReadPayload %d, %v", seq, src, k, err)
				}
				if _, err := m.ReadPayload(dst); err != nil { // again: a copy
					return badf("data %d from %d: second ReadPayload: %v", seq, src, err)
				}
				return check(src, seq, dst[:size])
			case 1:
				p, err := m.Payload()
				if err != nil || len(p) != size {
					return badf("data %d from %d: Payload %d bytes, %v", seq, src, len(p), err)
				}
				return check(src, seq, p)
			}
			if size > 0 {
				if _, err := m.ReadPayload(make([]byte, size-1)); !errors.Is(err, am.ErrTruncated) {
					return badf("data %d from %d: ReadPayload short: %v", seq, src, err)
				}
			}
			got[src] += size // left unread
			return nil
		},
		hEcho: func(ctx context.Context, m *am.Msg) error {
			p, err := m.Payload()
			if err != nil {
				return err
			}
			return m.Reply(echoOf(m.Header(), p))
		},
		hFail: func(ctx context.Context, m *am.Msg) error {
			return fmt.Errorf("refused by %d", me)
		},
		hHop: func(ctx context.Context, m *am.Msg) error {
			h := m.Header()
			hops, origin := at32(h, 0), at32(h, 1)
			if hops == 0 {
				arrived[origin]++
				return nil
			}
			if err := m.Reply(nil); !errors.Is(err, am.ErrInvalid) {
				return badf("reply to a message sent with Send: %v", err)
			}
			return e.Send(ctx, (me+1)%n, hHop, u32s(hops-1, origin), nil)
		},
		hNested: func(ctx context.Context, m *am.Msg) error {
			p, err := m.Payload()
			if err != nil {
				return err
			}
			r, err := e.Call(ctx, (me+1)%n, hEcho, []byte("N"), p, nil)
			if err != nil {
				return err
			}
			if err := m.Reply(r); err != nil {
				return err
			}
			if err := m.Reply(r); !errors.Is(err, am.ErrInvalid) {
				return badf("second reply: %v", err)
			}
			return nil
		},
		hNoReply: func(ctx context.Context, m *am.Msg) error { return nil },
	}
	for id, h := range reg {
		if err := e.Register(id, h); err != nil {
			return err
		}
	}
	// Data: round-robin over the destinations, starting with the next
	// rank; odd rounds by Isend, completed after the last round (or by
	// Test, every third).
	var payload []byte
	var reqs []*am.Request
	for seq := range rounds {
		size := sizes[seq%len(sizes)]
		for k := range n {
			dst := (me + 1 + k) % n
			if seq%2 == 1 {
				payload = nil // each Isend keeps its own until it completes
			}
			payload = payload[:0]
			for i := range size {
				payload = append(payload, fill(me, dst, seq, i))
			}
			if seq%2 == 0 {
				if err := e.Send(ctx, dst, hData, u32s(seq, size), payload); err != nil {
					return fmt.Errorf("send data %d to %d: %w", seq, dst, err)
				}
				continue
			}
			q, err := e.Isend(dst, hData, u32s(seq, size), payload)
			if err != nil {
				return fmt.Errorf("isend data %d to %d: %w", seq, dst, err)
			}
			if seq%3 == 0 {
				for {
					ok, err := q.Test()
					if err != nil {
						return err
					}
					if ok {
						break
					}
				}
			}
			reqs = append(reqs, q)
		}
	}
	for _, q := range reqs {
		if err := q.Wait(ctx); err != nil {
			return fmt.Errorf("isend: %w", err)
		}
	}
	// Calls.
	reply := make([]byte, 0, 64)
	for k := range n {
		dst := (me + k) % n
		for _, size := range []int{0, 5, inline - 16, inline, 40000} {
			p := bytes.Repeat([]byte{byte(me), byte(size)}, size/2+1)[:size]
			r, err := e.Call(ctx, dst, hEcho, []byte{byte(dst)}, p, reply)
			if err != nil {
				return fmt.Errorf("echo %d bytes on %d: %w", size, dst, err)
			}
			if want := echoOf([]byte{byte(dst)}, p); !bytes.Equal(r, want) {
				return fmt.Errorf("echo %d bytes on %d: %d bytes back, want %d", size, dst, len(r), len(want))
			}
			if len(r) <= cap(reply) && &r[0] != &reply[:1][0] {
				return fmt.Errorf("echo of %d bytes did not land in the reply buffer", len(r))
			}
		}
		_, err := e.Call(ctx, dst, hFail, nil, nil, nil)
		if !errors.Is(err, am.ErrRemote) || !strings.Contains(err.Error(), fmt.Sprintf("refused by %d", dst)) {
			return fmt.Errorf("failing call on %d: %v", dst, err)
		}
		_, err = e.Call(ctx, dst, hUnknown, nil, nil, nil)
		if !errors.Is(err, am.ErrRemote) || !strings.Contains(err.Error(), "no such handler") {
			return fmt.Errorf("call of an unregistered handler on %d: %v", dst, err)
		}
		r, err := e.Call(ctx, dst, hNoReply, nil, []byte("x"), reply)
		if err != nil || len(r) != 0 {
			return fmt.Errorf("call without reply on %d: %q, %v", dst, r, err)
		}
	}
	// A chain of 2n+1 handlers from the next rank ends where it began.
	if err := e.Send(ctx, (me+1)%n, hHop, u32s(2*n, me), nil); err != nil {
		return err
	}
	// Every rank calls the next, whose handler calls the next: a cycle.
	p := bytes.Repeat([]byte{byte(me + 1)}, 3000)
	r, err := e.Call(ctx, (me+1)%n, hNested, nil, p, nil)
	if err != nil {
		return fmt.Errorf("nested call: %w", err)
	}
	if want := echoOf([]byte("N"), p); !bytes.Equal(r, want) {
		return fmt.Errorf("nested call: %d bytes back, want %d", len(r), len(want))
	}
	if err := e.Quiesce(ctx); err != nil {
		return err
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	total := 0
	for _, s := range sizes {
		total += 3 * s
	}
	for src := range n {
		if next[src] != rounds || got[src] != total {
			return fmt.Errorf("after Quiesce: %d data messages (%d bytes) from rank %d, want %d (%d)", next[src], got[src], src, rounds, total)
		}
		want := 0
		if src == (me+n-1)%n {
			want = 1
		}
		if arrived[src] != want {
			return fmt.Errorf("after Quiesce: %d hop chains from rank %d ended here, want %d", arrived[src], src, want)
		}
	}
	return nil
}

// TestHandles: the scenario among 1 to 4 endpoint handles of one process,
// with a 64-byte inline limit (every payload but the smallest follows its
// header), and with aggregation (small messages in batches of 4 KiB, or
// of 256 bytes with the 64-byte inline limit).
func TestHandles(t *testing.T) {
	for _, tc := range []struct{ n, inline, agg int }{{1, 8192, 0}, {2, 8192, 0}, {3, 8192, 0}, {4, 8192, 0}, {3, 64, 0}, {1, 8192, 4096}, {3, 8192, 4096}, {4, 64, 256}} {
		t.Run(fmt.Sprintf("n%d/inline%d/agg%d", tc.n, tc.inline, tc.agg), func(t *testing.T) {
			ctx := eptest.Ctx(t, 60*time.Second)
			opts := []am.Option{am.WithInlineLimit(tc.inline), am.WithAggregation(tc.agg)}
			onEngines(t, ctx, handles(t, tc.n), opts, func(ctx context.Context, e *am.Engine) error {
				return scenario(ctx, e, tc.inline, false)
			})
		})
	}
}

// TestProcs: the scenario among 3 processes on the node transport (also
// with aggregation) and on tcp, then among 2 processes × 2 endpoint
// handles.
func TestProcs(t *testing.T) {
	for _, p := range append(providers, "native-agg") {
		t.Run(provName(p), func(t *testing.T) {
			var opts []am.Option
			if p == "native-agg" {
				p, opts = "native", []am.Option{am.WithAggregation(4096)}
			}
			if launchtest.RunOn(t, 3, p, 120*time.Second) {
				return
			}
			w := eptest.InitWorld(t)
			ctx := eptest.Ctx(t, 100*time.Second)
			if err := withEngine(ctx, w.Comm(), opts, func(ctx context.Context, e *am.Engine) error {
				return scenario(ctx, e, 8192, !launchtest.Short())
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("handles", func(t *testing.T) {
		if launchtest.RunOn(t, 2, "native", 120*time.Second) {
			return
		}
		w := eptest.InitWorld(t)
		ctx := eptest.Ctx(t, 100*time.Second)
		eps, err := w.Comm().CreateEndpoints(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, c := range eps {
				c.Free()
			}
		}()
		onEngines(t, ctx, eps, []am.Option{am.WithInlineLimit(256)}, func(ctx context.Context, e *am.Engine) error {
			return scenario(ctx, e, 256, false)
		})
	})
}
