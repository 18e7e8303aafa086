package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

var ssendSizes = []int{0, 8, 300, 20000, 200000}

// TestSynchronousSend: an Issend completes only once a receive has
// matched it, at every size class (where Isend of a small message
// completes at once), on the node transport, shared endpoints and
// libfabric; Ssend gives up with its context; ProcNull completes.
func TestSynchronousSend(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []endpoint.Option
	}{
		{"private", nil},
		{"shared", []endpoint.Option{endpoint.Shared(true)}},
		{"fabric", []endpoint.Option{endpoint.WithNodeTransport(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, ctx := singletonPair(t, tc.opts...)
			for i, sz := range ssendSizes {
				buf := make([]byte, sz)
				pattern(buf, 0, 1, i)
				r, err := a.Issend(buf, 1, i)
				if err != nil {
					t.Fatalf("Issend of %d bytes: %v", sz, err)
				}
				// Both sides driven for a while: the message arrives, no
				// receive matches it, the send stays incomplete.
				until := time.Now().Add(30 * time.Millisecond)
				for time.Now().Before(until) {
					if _, _, err := b.Iprobe(endpoint.AnySource, endpoint.AnyTag); err != nil {
						t.Fatal(err)
					}
					if done, _, err := r.Test(); done || err != nil {
						t.Fatalf("Issend of %d bytes completed (%v) with no receive posted", sz, err)
					}
				}
				got := make([]byte, sz)
				st, err := b.Recv(ctx, got, 0, i)
				if err != nil || st.Count != sz || !bytes.Equal(got, buf) {
					t.Fatalf("receive of a synchronous send of %d bytes: %+v %v", sz, st, err)
				}
				if _, err := r.Wait(ctx); err != nil {
					t.Fatalf("Issend of %d bytes after its receive: %v", sz, err)
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			if err := a.Ssend(cctx, []byte("unmatched"), 1, 99); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Ssend with no receive: %v, want its deadline", err)
			}
			// the unmatched message is still delivered to a later receive
			if st, err := b.Recv(ctx, make([]byte, 9), 0, 99); err != nil || st.Count != 9 {
				t.Fatalf("receive of the abandoned Ssend's message: %+v %v", st, err)
			}
			if err := a.Ssend(ctx, nil, endpoint.ProcNull, 1); err != nil {
				t.Fatalf("Ssend to ProcNull: %v", err)
			}
		})
	}
}

// TestSynchronousSendProcs: Ssend between processes on every provider
// returns no sooner than the receive is posted (rank 1 posts it 100 ms
// late), with every size class.
func TestSynchronousSendProcs(t *testing.T) {
	onPairOfProcs(t, func(ctx context.Context, c *endpoint.Comm) error {
		const late = 100 * time.Millisecond
		for i, sz := range ssendSizes {
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			buf := make([]byte, sz)
			if c.Rank() == 0 {
				pattern(buf, 0, 1, i)
				start := time.Now()
				if err := c.Ssend(ctx, buf, 1, i); err != nil {
					return fmt.Errorf("Ssend of %d bytes: %w", sz, err)
				}
				if took := time.Since(start); took < late*9/10 {
					return fmt.Errorf("Ssend of %d bytes returned after %v, before its receive was posted (%v)", sz, took, late)
				}
				continue
			}
			time.Sleep(late)
			want := make([]byte, sz)
			pattern(want, 0, 1, i)
			if st, err := c.Recv(ctx, buf, 0, i); err != nil || st.Count != sz || !bytes.Equal(buf, want) {
				return fmt.Errorf("receive of %d bytes: %+v %v", sz, st, err)
			}
		}
		return nil
	})
}
