package shmring

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// stressSize spreads message sizes over 0..max, most of them small.
func stressSize(id uint64, max int) int {
	if id%16 == 0 {
		return int(id/16*97) % (max + 1)
	}
	return int(id*5) % (FirstPayload + 1)
}

// TestStress runs millions of messages (fewer with -short) from one
// goroutine to another through a small ring, singly and in batches, and
// checks every user word, length and payload byte, in order.
func TestStress(t *testing.T) {
	total := uint64(2_000_000)
	if testing.Short() {
		total = 50_000
	}
	const cells = 64
	max := 600
	_, pr, co := newRing(t, cells, max)
	deadline := time.Now().Add(2 * time.Minute)
	errc := make(chan error, 1)
	go func() {
		var next uint64
		users := make([]uint64, 0, 8)
		payloads := make([][]byte, 0, 8)
		for spins := 0; next < total; {
			if next%3 == 0 { // a batch of up to 8
				users, payloads = users[:0], payloads[:0]
				for i := next; i < total && i < next+8; i++ {
					users = append(users, i)
					payloads = append(payloads, pattern(i, stressSize(i, max)))
				}
				n, err := pr.TrySendv(users, payloads)
				if err != nil {
					errc <- err
					return
				}
				next += uint64(n)
				if n > 0 {
					continue
				}
			} else {
				ok, err := pr.TrySend(next, pattern(next, stressSize(next, max)))
				if err != nil {
					errc <- err
					return
				}
				if ok {
					next++
					continue
				}
			}
			if spins++; spins%64 == 0 {
				if time.Now().After(deadline) {
					errc <- fmt.Errorf("producer stuck at message %d", next)
					return
				}
				runtime.Gosched()
			}
		}
		errc <- nil
	}()
	buf := make([]byte, max)
	for want, spins := uint64(0), 0; want < total; {
		u, n, ok, err := co.TryRecv(buf)
		if err != nil {
			t.Fatalf("message %d: %v", want, err)
		}
		if !ok {
			if spins++; spins%64 == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("consumer stuck at message %d", want)
				}
				runtime.Gosched()
			}
			continue
		}
		if u != want || n != stressSize(want, max) || !bytes.Equal(buf[:n], pattern(want, n)) {
			t.Fatalf("message %d: got user %d, %d bytes", want, u, n)
		}
		want++
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mustEmpty(t, co)
}
