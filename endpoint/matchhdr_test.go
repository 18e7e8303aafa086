package endpoint_test

import (
	"bytes"
	"testing"

	"github.com/weft-hpc/weft/endpoint"
)

// TestMatchHeaderEagerBoundary: in match-header mode the 8-byte header
// counts against the eager limit, so that no eager message on the wire
// exceeds it (ofi_rxm's eager buffer is 16 KiB; a longer message would
// take its rendezvous and could be overtaken): a message of the limit less
// 8 bytes goes eagerly, one of 7 bytes less by rendezvous; with the match
// word in CQ data a message of the limit itself is eager. Each message,
// followed by a 1-byte one with the same tag, arrives whole and first.
func TestMatchHeaderEagerBoundary(t *testing.T) {
	defer endpoint.ForceMatchHeader(false)
	for _, hdr := range []bool{false, true} {
		endpoint.ForceMatchHeader(hdr)
		x, y, ctx := singletonPair(t, endpoint.WithNodeTransport(false))
		limit := endpoint.EagerLimit(x)
		hl := 0
		if hdr {
			hl = 8
		}
		for _, size := range []int{limit - 8, limit - 7, limit, limit + 1} {
			msg := make([]byte, size)
			for i := range msg {
				msg[i] = byte(i*13 + size)
			}
			big, small := make([]byte, limit+1), make([]byte, limit+1)
			rb, err := y.Irecv(big, 0, 9)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := y.Irecv(small, 0, 9)
			if err != nil {
				t.Fatal(err)
			}
			s1, err := x.Isend(msg, 1, 9)
			if err != nil {
				t.Fatal(err)
			}
			if eager, want := endpoint.SentEagerly(s1), size <= limit-hl; eager != want {
				t.Errorf("match header %v: %d-byte send eager %v, want %v (eager limit %d)", hdr, size, eager, want, limit)
			}
			s2, err := x.Isend([]byte{0x5a}, 1, 9)
			if err != nil {
				t.Fatal(err)
			}
			if err := endpoint.WaitAll(ctx, rb, rs, s1, s2); err != nil {
				t.Fatal(err)
			}
			stb, _ := rb.Wait(ctx)
			sts, _ := rs.Wait(ctx)
			if stb.Count != size || !bytes.Equal(big[:size], msg) || sts.Count != 1 || small[0] != 0x5a {
				t.Fatalf("match header %v, %d bytes then 1: first receive got %d bytes (equal %v), second %d",
					hdr, size, stb.Count, bytes.Equal(big[:stb.Count], msg[:min(stb.Count, size)]), sts.Count)
			}
		}
		t.Logf("match header %v: eager up to %d bytes of a %d-byte limit", hdr, limit-hl, limit)
	}
}
