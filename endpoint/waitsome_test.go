package endpoint_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

// TestWaitSome: TestAny and TestSome report nothing before a message
// comes; WaitSome returns once some have completed and reports each
// request once, with its own status and error (a truncated receive's
// error in its Completion, not WaitSome's); nil requests are skipped; a
// context that ends while a request is pending ends WaitSome; with no
// request left it returns at once. Both transports.
func TestWaitSome(t *testing.T) {
	for _, native := range []bool{true, false} {
		a, b, ctx := singletonPair(t, endpoint.WithNodeTransport(native))
		const n = 5
		reqs := make([]*endpoint.Request, n+1) // the last stays nil
		bufs := make([][]byte, n)
		for k := range bufs {
			bufs[k] = make([]byte, 8)
			if k == 3 {
				bufs[k] = make([]byte, 4) // too short: truncated
			}
			var err error
			if reqs[k], err = b.Irecv(bufs[k], 0, 40+k); err != nil {
				t.Fatal(err)
			}
		}
		if k, _, err := endpoint.TestAny(reqs); k != -1 || err != nil {
			t.Fatalf("TestAny before any message: %d, %v", k, err)
		}
		if got := endpoint.TestSome(reqs, nil); len(got) != 0 {
			t.Fatalf("TestSome before any message: %+v", got)
		}
		sent := make(chan error, 1)
		go func() { // a's owner for now
			for _, tg := range []int{43, 41, 40, 44, 42} {
				if err := a.Send(ctx, []byte("waitsome"), 1, tg); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		seen := map[int]bool{}
		var done []endpoint.Completion
		for len(seen) < n {
			var err error
			if done, err = endpoint.WaitSome(ctx, reqs, done[:0]); err != nil {
				t.Fatal(err)
			}
			if len(done) == 0 {
				t.Fatalf("WaitSome returned nothing with %d requests pending", n-len(seen))
			}
			for _, c := range done {
				if seen[c.Index] || reqs[c.Index] != nil || c.Status.Tag != 40+c.Index {
					t.Fatalf("completion %+v (seen before: %v)", c, seen[c.Index])
				}
				seen[c.Index] = true
				if c.Index == 3 {
					if !errors.Is(c.Err, endpoint.ErrTruncated) {
						t.Fatalf("the short receive's completion: %v, want ErrTruncated", c.Err)
					}
				} else if c.Err != nil || string(bufs[c.Index]) != "waitsome" {
					t.Fatalf("completion %d: %v, %q", c.Index, c.Err, bufs[c.Index])
				}
			}
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		if got, err := endpoint.WaitSome(ctx, reqs, nil); len(got) != 0 || err != nil {
			t.Fatalf("WaitSome with nothing left: %+v, %v", got, err)
		}
		// A pending request and a context that ends.
		r, err := b.Irecv(make([]byte, 8), 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		got, err := endpoint.WaitSome(short, []*endpoint.Request{r}, nil)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || len(got) != 0 {
			t.Fatalf("WaitSome past its deadline: %+v, %v", got, err)
		}
		if k, _, _ := endpoint.TestAny([]*endpoint.Request{r}); k != -1 {
			t.Fatalf("TestAny of a receive nobody sent to: %d", k)
		}
		if err := r.Cancel(); err != nil {
			t.Fatal(err)
		}
	}
}
