package endpoint_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// randomSendType draws message i of rank src for seed: a random layout
// (ddttest.RandomLayout) of up to 64 KiB, a third of them repeated into
// 64–512 KiB. Sender and receiver draw the same.
func randomSendType(seed uint64, i, src int) (*ddt.Type, int) {
	r := rand.New(rand.NewPCG(seed, uint64(i)<<16|uint64(src)))
	for {
		t, count := ddttest.RandomLayout(r, ddttest.Limits{Depth: 4, MaxBytes: 1 << 16, MaxSpan: 1 << 18})
		if r.IntN(3) != 0 {
			return t, count
		}
		big, err := ddt.Contiguous(max(1, (64<<10+r.IntN(448<<10))/int(t.Size())/count), t)
		if err != nil || big.Extent() > 4<<20 {
			continue
		}
		if err := big.Commit(); err != nil {
			panic(fmt.Sprintf("commit of a random type: %v", err))
		}
		return big, count
	}
}

// typedBuffer is the buffer message i of rank src is sent from: 3 bytes
// of misalignment, then the span of count elements of t, patterned.
func typedBuffer(t *ddt.Type, count int, i, src int) []byte {
	n, _ := ddttest.Layout(t, count)
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(k*13 + i*7 + src*29 + 1)
	}
	return b
}

// typedRandomScenario: messages of random derived datatypes around a
// ring, each rank sending count elements of its type from a misaligned,
// patterned buffer and receiving its left neighbour's with the same type
// into a zeroed one; what the type covers must be the sender's bytes, and
// every other byte still zero (ddttest's reference packer decides both).
func typedRandomScenario(ctx context.Context, c *endpoint.Comm, seed uint64, msgs int) error {
	me, n := c.Rank(), c.Size()
	right, left := (me+1)%n, (me+n-1)%n
	for i := range msgs {
		st, scount := randomSendType(seed, i, me)
		rt, rcount := randomSendType(seed, i, left)
		sbuf := typedBuffer(st, scount, i, me)
		rlen, _ := ddttest.Layout(rt, rcount)
		rbuf := make([]byte, rlen)
		rr, err := c.IrecvTyped(rbuf[3:], rcount, rt, left, i)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		sr, err := c.IsendTyped(sbuf[3:], scount, st, right, i)
		if err != nil {
			return fmt.Errorf("message %d (%v × %d): %w", i, st, scount, err)
		}
		if err := endpoint.WaitAll(ctx, rr, sr); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		sent := ddttest.Pack(rt, typedBuffer(rt, rcount, i, left), 3, rcount)
		want := ddttest.UnpackRange(rt, make([]byte, rlen), sent, 3, rcount, 0)
		if !bytes.Equal(rbuf, want) {
			k := 0
			for rbuf[k] == want[k] {
				k++
			}
			return fmt.Errorf("message %d from rank %d (%d × %v, %d bytes): byte %d of the buffer is %d, want %d",
				i, left, rcount, rt, len(sent), k, rbuf[k], want[k])
		}
	}
	return c.Barrier(ctx)
}

// typedRandomMsgs is how many messages each rank of the random-datatype
// tests sends: 60, or 15 under the race detector, which looks for
// unsynchronised access rather than rare layouts (and checks each message
// about ten times slower).
func typedRandomMsgs() int {
	if testenv.Race {
		return 15
	}
	return 60
}

// TestTypedRandomHandles: random datatypes among three endpoints of one
// process.
func TestTypedRandomHandles(t *testing.T) {
	ctx, eps := singletonHandles(t, 3)
	runHandles(t, ctx, eps, func(ctx context.Context, c *endpoint.Comm) error {
		return typedRandomScenario(ctx, c, 1, typedRandomMsgs())
	})
}

// TestTypedRandomProcs: random datatypes around a ring of three processes
// on every transport, eager, pipelined and zero-copy sizes mixed.
func TestTypedRandomProcs(t *testing.T) {
	for _, p := range providers {
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 3, p, 120*time.Second) {
				return
			}
			w := initWorld(t)
			ctx := eptest.Ctx(t, 90*time.Second)
			if err := typedRandomScenario(ctx, w.Comm(), 2, typedRandomMsgs()); err != nil {
				t.Fatalf("rank %d: %v", w.Comm().Rank(), err)
			}
		})
	}
}
