package endpoint_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
)

// trafficMsg is one message of a traffic script.
type trafficMsg struct {
	src, seq, dest, tag, size int
}

// trafficScript is every rank's messages of one seed, each rank's in its
// send order: destinations (itself included), tags and sizes drawn
// around the communicator's eager limit and up to rendezvous sizes.
func trafficScript(c *endpoint.Comm, seed uint64, perRank int) [][]trafficMsg {
	e := endpoint.EagerLimit(c)
	sizes := []int{16, 17, 100, 1000, e - 1, e, e + 1, 20000, 65536, 65537, 200000}
	out := make([][]trafficMsg, c.Size())
	for s := range out {
		r := rand.New(rand.NewPCG(seed, uint64(s)))
		for k := range perRank {
			out[s] = append(out[s], trafficMsg{s, k, r.IntN(c.Size()), r.IntN(3), max(16, sizes[r.IntN(len(sizes))])})
		}
	}
	return out
}

// fillTraffic writes message m's contents: its source and number, then a
// pattern of both.
func fillTraffic(b []byte, m trafficMsg) {
	binary.LittleEndian.PutUint32(b, uint32(m.src))
	binary.LittleEndian.PutUint32(b[4:], uint32(m.seq))
	binary.LittleEndian.PutUint64(b[8:], uint64(m.size))
	for i := 16; i < len(b); i++ {
		b[i] = byte(m.src*131 + m.seq*31 + i*7)
	}
}

// Receive patterns of trafficScenario, posted in this order so that no
// receive can take a message a later one needs: exact source and tag,
// then source only, then anything.
const (
	patExact = iota
	patSource
	patAny
)

// trafficScenario runs one seed of random traffic on c and checks it
// against MPI's rules: every rank sends its script (Isend), and posts one
// receive per message coming to it — of exact source and tag, of its
// source and any tag, or of any source and tag, in that order — at a
// random point among its sends. Every message must arrive once, whole,
// with the status of its source, tag and length, into a receive whose
// pattern it matches; and of the messages one source sends that land in
// receives of one pattern, the earlier sent must land in the earlier
// posted receive (non-overtaking).
func trafficScenario(ctx context.Context, c *endpoint.Comm, seed uint64, perRank int) error {
	me := c.Rank()
	script := trafficScript(c, seed, perRank)
	var incoming []trafficMsg
	maxSize := 0
	for _, msgs := range script {
		for _, m := range msgs {
			maxSize = max(maxSize, m.size)
			if m.dest == me {
				incoming = append(incoming, m)
			}
		}
	}
	r := rand.New(rand.NewPCG(seed, 1000+uint64(me)))
	type recv struct {
		pat, src, tag int
		buf           []byte
		req           *endpoint.Request
	}
	// Each message draws the pattern of a receive for it; the receives
	// are posted pattern by pattern, each pattern's in a random order.
	byPat := make([][]*recv, patAny+1)
	for _, m := range incoming {
		pat := r.IntN(patAny + 1)
		byPat[pat] = append(byPat[pat], &recv{pat: pat, src: m.src, tag: m.tag})
	}
	var recvs []*recv
	for _, these := range byPat {
		r.Shuffle(len(these), func(i, j int) { these[i], these[j] = these[j], these[i] })
		recvs = append(recvs, these...)
	}
	post := func() error {
		for _, rv := range recvs {
			src, tag := rv.src, rv.tag
			switch rv.pat {
			case patSource:
				tag = endpoint.AnyTag
			case patAny:
				src, tag = endpoint.AnySource, endpoint.AnyTag
			}
			rv.buf = make([]byte, maxSize)
			var err error
			if rv.req, err = c.Irecv(rv.buf, src, tag); err != nil {
				return err
			}
		}
		return nil
	}
	mine := script[me]
	at := r.IntN(len(mine) + 1) // sends before the receives are posted
	var sends []*endpoint.Request
	for k, m := range mine {
		if k == at {
			if err := post(); err != nil {
				return err
			}
		}
		b := make([]byte, m.size)
		fillTraffic(b, m)
		s, err := c.Isend(b, m.dest, m.tag)
		if err != nil {
			return err
		}
		sends = append(sends, s)
	}
	if at == len(mine) {
		if err := post(); err != nil {
			return err
		}
	}
	got := map[[2]int]bool{}
	last := map[[3]int]int{} // (pattern, source, tag or -1) → last number received
	for i, rv := range recvs {
		st, err := rv.req.Wait(ctx)
		if err != nil {
			return fmt.Errorf("receive %d (pattern %d): %w", i, rv.pat, err)
		}
		b := rv.buf[:st.Count]
		if st.Count < 16 {
			return fmt.Errorf("receive %d: %d bytes from rank %d", i, st.Count, st.Source)
		}
		m := script[int(binary.LittleEndian.Uint32(b))][int(binary.LittleEndian.Uint32(b[4:]))]
		want := make([]byte, m.size)
		fillTraffic(want, m)
		switch {
		case m.dest != me || got[[2]int{m.src, m.seq}]:
			return fmt.Errorf("receive %d: message %d of rank %d (to %d) arrived here twice or astray", i, m.seq, m.src, m.dest)
		case st.Source != m.src || st.Tag != m.tag || st.Count != m.size:
			return fmt.Errorf("receive %d: status (source %d, tag %d, %d bytes) for message %d of rank %d (tag %d, %d bytes)",
				i, st.Source, st.Tag, st.Count, m.seq, m.src, m.tag, m.size)
		case string(b) != string(want):
			return fmt.Errorf("receive %d: message %d of rank %d corrupted", i, m.seq, m.src)
		case rv.pat != patAny && m.src != rv.src || rv.pat == patExact && m.tag != rv.tag:
			return fmt.Errorf("receive %d of pattern (%d, %d, %d) took message %d of rank %d with tag %d", i, rv.pat, rv.src, rv.tag, m.seq, m.src, m.tag)
		}
		got[[2]int{m.src, m.seq}] = true
		key := [3]int{rv.pat, m.src, -1}
		if rv.pat == patExact {
			key[2] = m.tag
		}
		if prev, ok := last[key]; ok && prev > m.seq {
			return fmt.Errorf("receive %d (pattern %d): message %d of rank %d after its message %d: overtaken", i, rv.pat, m.seq, m.src, prev)
		}
		last[key] = m.seq
	}
	if err := endpoint.WaitAll(ctx, sends...); err != nil {
		return err
	}
	return c.Barrier(ctx)
}

// TestTrafficHandles: random traffic among four endpoints of one
// process, five seeds.
func TestTrafficHandles(t *testing.T) {
	ctx, eps := singletonHandles(t, 4)
	for seed := range uint64(5) {
		runHandles(t, ctx, eps, func(ctx context.Context, c *endpoint.Comm) error {
			return trafficScenario(ctx, c, seed, 80)
		})
	}
}

// TestTrafficProcs: random traffic among three processes on every
// transport (the match-header framing too), then among two endpoints of
// each (in-process and cross-process peers mixed).
func TestTrafficProcs(t *testing.T) {
	for _, p := range withHdr {
		if hdrOff(p, true, true) {
			continue
		}
		t.Run(provName(p), func(t *testing.T) {
			if launch(t, 3, p, 90*time.Second) {
				return
			}
			w := initWorld(t)
			ctx := eptest.Ctx(t, 60*time.Second)
			world := w.Comm()
			for seed := range uint64(3) {
				if err := trafficScenario(ctx, world, seed, 60); err != nil {
					t.Fatalf("rank %d, seed %d: %v", world.Rank(), seed, err)
				}
			}
			eps, err := world.CreateEndpoints(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			runHandles(t, ctx, eps, func(ctx context.Context, c *endpoint.Comm) error {
				defer c.Free()
				return trafficScenario(ctx, c, 7, 30)
			})
		})
	}
}
