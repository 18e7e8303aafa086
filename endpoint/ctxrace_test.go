package endpoint_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/weft-hpc/weft/endpoint"
)

// TestConcurrentCreation: goroutines of one process create communicators
// at the same time from different parents (two endpoints communicators,
// two handles each, every handle duplicating its own 100 times while
// the other pair does the same, then splitting): every communicator
// alive at once in the process has its own context id, and a message
// sent on one is received on it, never on the other pair's.
func TestConcurrentCreation(t *testing.T) {
	w, ctx := singletonWorld(t)
	var pairs [2][]*endpoint.Comm
	for i := range pairs {
		eps, err := w.Comm().CreateEndpoints(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		pairs[i] = eps
	}
	// Also two parents on one endpoint, the world and its duplicate,
	// each duplicated by a goroutine of its own: their children share
	// the endpoint, so a shared context id would mix their messages.
	dupOfWorld, err := w.Comm().Dup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sameEP [2][]*endpoint.Comm
	var wg2 sync.WaitGroup
	errs2 := make([]error, 2)
	for g, parent := range []*endpoint.Comm{w.Comm(), dupOfWorld} {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			errs2[g] = func() error {
				for i := range 100 {
					d, err := parent.Dup(ctx)
					if err != nil {
						return err
					}
					sameEP[g] = append(sameEP[g], d)
					msg := []byte(fmt.Sprintf("parent %d round %d", g, i))
					if _, err := d.Isend(msg, 0, 3); err != nil {
						return err
					}
					got := make([]byte, 64)
					st, err := d.Recv(ctx, got, 0, 3)
					if err != nil {
						return err
					}
					if string(got[:st.Count]) != string(msg) {
						return fmt.Errorf("received %q on parent %d's communicator of round %d", got[:st.Count], g, i)
					}
				}
				return nil
			}()
		}()
	}
	wg2.Wait()
	for g, err := range errs2 {
		if err != nil {
			t.Fatalf("parent %d: %v", g, err)
		}
	}
	ids := map[int]bool{}
	for _, cs := range sameEP {
		for _, c := range cs {
			if ids[c.ContextID()] {
				t.Fatalf("two communicators on the world's endpoint with context id %d", c.ContextID())
			}
			ids[c.ContextID()] = true
			c.Free()
		}
	}
	const rounds = 100
	made := make([][]*endpoint.Comm, 4) // by goroutine: handle h of pair h/2
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = func() error {
				c := pairs[g/2][g%2]
				for i := range rounds {
					d, err := c.Dup(ctx)
					if err != nil {
						return err
					}
					made[g] = append(made[g], d)
					// one message each way on the new communicator, with
					// the same tags and ranks in both pairs
					msg := []byte(fmt.Sprintf("pair %d round %d from %d", g/2, i, g%2))
					got := make([]byte, 64)
					q, err := d.Irecv(got, 1-g%2, 3)
					if err != nil {
						return err
					}
					if err := d.Send(ctx, msg, 1-g%2, 3); err != nil {
						return err
					}
					st, err := q.Wait(ctx)
					if err != nil {
						return err
					}
					want := fmt.Sprintf("pair %d round %d from %d", g/2, i, 1-g%2)
					if n := st.Count; string(got[:n]) != want {
						return fmt.Errorf("handle %d of pair %d received %q on its communicator, want %q", g%2, g/2, got[:n], want)
					}
				}
				s, err := c.Split(ctx, 0, g%2)
				if err != nil {
					return err
				}
				made[g] = append(made[g], s)
				return nil
			}()
		}()
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: %v", g, err)
		}
	}
	// The two handles of a pair share each communicator's id; no two
	// communicators of different pairs (or rounds) do.
	owner := map[int]string{}
	for g := range 4 {
		for i, c := range made[g] {
			who := fmt.Sprintf("pair %d, communicator %d", g/2, i)
			if prev, ok := owner[c.ContextID()]; ok && prev != who {
				t.Fatalf("context id %d held by %s and by %s", c.ContextID(), prev, who)
			}
			owner[c.ContextID()] = who
		}
	}
	for g := range 4 {
		for _, c := range made[g] {
			c.Free()
		}
	}
}
