// Command histogram builds a distributed histogram with active messages:
// every rank draws samples, and each sample's bin lives on the rank that
// owns it (bin mod size). Samples travel in batches, one active message
// per owner and batch, whose handler adds them to the owner's bins; a
// Quiesce ends the update phase, and rank 0 then reads every rank's bins
// with calls and checks them against the same draws made serially.
//
//	fabrun -n 4 bin/histogram
//	fabrun -n 3 --provider 'tcp;ofi_rxm' --env WEFT_NODE_TRANSPORT=fabric bin/histogram
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/weft-hpc/weft/am"
	"github.com/weft-hpc/weft/endpoint"
)

const (
	bins    = 1000
	samples = 200000 // per rank
	batch   = 256    // samples per active message
	hAdd    = 1      // header: nothing; payload: bin numbers (uint32)
	hBins   = 2      // a call: the caller's rank's bins, as uint64s
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "histogram:", err)
		os.Exit(1)
	}
}

// draws returns rank r's samples: bins skewed toward the low ones.
func draws(r int) []uint32 {
	rng := rand.New(rand.NewPCG(uint64(r), 2026))
	s := make([]uint32, samples)
	for i := range s {
		s[i] = uint32(min(rng.ExpFloat64()*bins/4, bins-1))
	}
	return s
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	world, err := endpoint.Init(ctx)
	if err != nil {
		return err
	}
	defer world.Close()
	e, err := am.Open(ctx, world.Comm())
	if err != nil {
		return err
	}
	defer e.Close(ctx)
	me, n := e.Rank(), e.Size()

	// This rank's bins: bin b is local bin b/n of rank b%n.
	local := make([]uint64, (bins+n-1)/n)
	e.Register(hAdd, func(ctx context.Context, m *am.Msg) error {
		p, err := m.Payload()
		if err != nil {
			return err
		}
		for i := 0; i+4 <= len(p); i += 4 {
			b := int(binary.LittleEndian.Uint32(p[i:]))
			if b%n != me {
				return fmt.Errorf("bin %d sent to rank %d", b, me)
			}
			local[b/n]++
		}
		return nil
	})
	e.Register(hBins, func(ctx context.Context, m *am.Msg) error {
		out := make([]byte, 0, 8*len(local))
		for _, v := range local {
			out = binary.LittleEndian.AppendUint64(out, v)
		}
		return m.Reply(out)
	})

	start := time.Now()
	pending := make([][]byte, n) // per owner: bin numbers not yet sent
	for _, b := range draws(me) {
		o := int(b) % n
		pending[o] = binary.LittleEndian.AppendUint32(pending[o], b)
		if len(pending[o]) == 4*batch {
			if err := e.Send(ctx, o, hAdd, nil, pending[o]); err != nil {
				return err
			}
			pending[o] = pending[o][:0]
		}
	}
	for o, p := range pending {
		if len(p) > 0 {
			if err := e.Send(ctx, o, hAdd, nil, p); err != nil {
				return err
			}
		}
	}
	if err := e.Quiesce(ctx); err != nil { // every sample is in its bin
		return err
	}
	took := time.Since(start)

	if me == 0 {
		want := make([]uint64, bins)
		for r := range n {
			for _, b := range draws(r) {
				want[b]++
			}
		}
		var total uint64
		var reply []byte
		for r := range n {
			if reply, err = e.Call(ctx, r, hBins, nil, nil, reply); err != nil {
				return err
			}
			for lb := range len(reply) / 8 {
				b := lb*n + r
				got := binary.LittleEndian.Uint64(reply[8*lb:])
				if b < bins && got != want[b] || b >= bins && got != 0 {
					return fmt.Errorf("bin %d on rank %d: %d samples, want %d", b, r, got, want[b])
				}
				total += got
			}
		}
		if total != uint64(n*samples) {
			return fmt.Errorf("%d samples in the bins, want %d", total, n*samples)
		}
		fmt.Printf("histogram: %d ranks, %d samples in %d bins, checked; updates took %v (%.1f M samples/s)\n",
			n, total, bins, took.Round(time.Millisecond), float64(total)/took.Seconds()/1e6)
	}
	return e.Quiesce(ctx) // rank 0's calls are answered before anyone leaves
}
