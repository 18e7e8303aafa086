package collectives_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	C "github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/internal/eptest"
)

// randomCollType draws round k's random layout (ddttest.RandomLayout),
// the same on every rank: no byte written twice, a few KiB at most.
func randomCollType(k int) (*ddt.Type, int) {
	r := rand.New(rand.NewPCG(uint64(k), 77))
	return ddttest.RandomLayout(r, ddttest.Limits{Depth: 3, MaxBytes: 4096, MaxSpan: 1 << 16, Disjoint: true})
}

// patterned is a buffer of n bytes of rank's pattern for round k.
func patterned(n, k, rank int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + k*13 + rank*31 + 1)
	}
	return b
}

// TestTypedRandomCollectives: BcastTyped (every algorithm, every root),
// AllgatherTyped and AlltoallTyped (every algorithm) of random derived
// datatypes among 3 and 4 handles, each result compared byte for byte,
// gaps included, with the reference packer's unpacking of what was sent.
func TestTypedRandomCollectives(t *testing.T) {
	for _, p := range []int{3, 4} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			runHandles(t, eptest.Ctx(t, 60*time.Second), handles(t, p), nil, func(ctx context.Context, c *C.Coll) error {
				me := c.Rank()
				for k := range 24 {
					ty, n := randomCollType(k)
					span, _ := ddttest.Layout(ty, n)
					big, _ := ddttest.Layout(ty, p*n)
					// Bcast: the root's elements over zeroed buffers.
					for _, alg := range []C.Algorithm{C.Binomial, C.ScatterAllgather, C.Linear} {
						if err := c.SetAlgorithm(C.CollBcast, alg); err != nil {
							return err
						}
						root := k % p
						buf := make([]byte, span)
						if me == root {
							buf = patterned(span, k, root)
						}
						if err := C.BcastTyped(ctx, c, buf[3:], n, ty, root); err != nil {
							return fmt.Errorf("round %d, bcast %s: %w", k, alg, err)
						}
						want := patterned(span, k, root)
						if me != root {
							want = ddttest.UnpackRange(ty, make([]byte, span), ddttest.Pack(ty, want, 3, n), 3, n, 0)
						}
						if !bytes.Equal(buf, want) {
							return fmt.Errorf("round %d: bcast %s of %d × %v from %d differs", k, alg, n, ty, root)
						}
					}
					// Allgather: rank q's elements at q·n.
					var stream []byte
					for q := range p {
						stream = append(stream, ddttest.Pack(ty, patterned(span, k, q), 3, n)...)
					}
					wantAll := ddttest.UnpackRange(ty, make([]byte, big), stream, 3, p*n, 0)
					for _, alg := range []C.Algorithm{C.Bruck, C.Ring} {
						_ = c.SetAlgorithm(C.CollAllgather, alg)
						recv := make([]byte, big)
						if err := C.AllgatherTyped(ctx, c, patterned(span, k, me)[3:], n, ty, recv[3:], n, ty); err != nil {
							return fmt.Errorf("round %d, allgather %s: %w", k, alg, err)
						}
						if !bytes.Equal(recv, wantAll) {
							return fmt.Errorf("round %d: allgather %s of %d × %v differs", k, alg, n, ty)
						}
					}
					// Alltoall: block j of rank q's p·n elements to rank j,
					// at block q there.
					var mine []byte
					for q := range p {
						s := ddttest.Pack(ty, patterned(big, k, q), 3, p*n)
						blk := len(s) / p
						mine = append(mine, s[me*blk:(me+1)*blk]...)
					}
					wantA := ddttest.UnpackRange(ty, make([]byte, big), mine, 3, p*n, 0)
					for _, alg := range []C.Algorithm{C.Linear, C.Pairwise} {
						_ = c.SetAlgorithm(C.CollAlltoall, alg)
						recv := make([]byte, big)
						if err := C.AlltoallTyped(ctx, c, patterned(big, k, me)[3:], n, ty, recv[3:], n, ty); err != nil {
							return fmt.Errorf("round %d, alltoall %s: %w", k, alg, err)
						}
						if !bytes.Equal(recv, wantA) {
							return fmt.Errorf("round %d: alltoall %s of %d × %v differs", k, alg, n, ty)
						}
					}
				}
				return nil
			})
		})
	}
}
