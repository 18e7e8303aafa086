package endpoint_test

import (
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// TestCloseWaitsForStagedReads: a send the node transport stages is
// complete at once, but its receiver copies it from the sender's memory
// later. Rank 1 sends a staged byte message and a staged typed one, then
// closes its world and its process exits; rank 0 receives them only after
// rank 1 has reached Close, and gets every byte (before Close waited for
// the receivers' copies, the copy failed with "no such process").
func TestCloseWaitsForStagedReads(t *testing.T) {
	if !launchtest.IsWorker() {
		skipRepeatPass(t)
		prov, env := provEnv("native", nil)
		launchtest.Run(t, 2, prov, 60*time.Second, env...)
		return
	}
	ctx := eptest.Ctx(t, 45*time.Second)
	w := initWorld(t)
	c := w.Comm()
	if tr, _ := c.Transport(1 - c.Rank()); tr != endpoint.TransportNode {
		t.Fatalf("peer reached through %s", tr)
	}
	vt, small, typed := stagedMessages(t)
	if c.Rank() == 1 {
		fillStaged(small, typed, 7, 13)
		if err := c.Send(ctx, small, 0, 1); err != nil {
			t.Fatal(err)
		}
		if err := c.SendTyped(ctx, typed, 1, vt, 0, 2); err != nil {
			t.Fatal(err)
		}
		// Both sends are complete; tell rank 0, then leave at once.
		if err := c.Send(ctx, []byte{1}, 0, 3); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return // and the process exits
	}
	defer w.Close()
	if _, err := c.Recv(ctx, make([]byte, 1), 1, 3); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // rank 1 is in Close, or would have exited
	if _, err := c.Recv(ctx, small, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RecvTyped(ctx, typed, 1, vt, 1, 2); err != nil {
		t.Fatal(err)
	}
	checkStaged(t, small, typed, 7, 13)
}

// TestFreeKeepsStagedReads: as TestCloseWaitsForStagedReads, from
// handles of CreateEndpoints. Rank 1's handle sends a staged byte
// message and a staged typed one to rank 0's handle, then rank 1 frees
// its handles, closes its world and exits; rank 0 receives them only
// after that. Freeing must not drop the staging buffers (the endpoint
// stays until World.Close) and Close must wait for the copies.
func TestFreeKeepsStagedReads(t *testing.T) {
	if !launchtest.IsWorker() {
		skipRepeatPass(t)
		prov, env := provEnv("native", nil)
		launchtest.Run(t, 2, prov, 60*time.Second, env...)
		return
	}
	ctx := eptest.Ctx(t, 45*time.Second)
	w := initWorld(t)
	wc := w.Comm()
	eps, err := wc.CreateEndpoints(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := eps[0]
	peer := 1 - c.Rank()
	if tr, _ := c.Transport(peer); tr != endpoint.TransportNode {
		t.Fatalf("peer reached through %s", tr)
	}
	vt, small, typed := stagedMessages(t)
	if wc.Rank() == 1 {
		fillStaged(small, typed, 5, 11)
		if err := c.Send(ctx, small, peer, 1); err != nil {
			t.Fatal(err)
		}
		if err := c.SendTyped(ctx, typed, 1, vt, peer, 2); err != nil {
			t.Fatal(err)
		}
		if err := c.Free(); err != nil {
			t.Fatal(err)
		}
		// Overwrite what Go may hand out again, had the buffers been dropped.
		for range 64 {
			b := make([]byte, 64<<10)
			for i := range b {
				b[i] = 0xee
			}
		}
		if err := wc.Send(ctx, []byte{1}, 0, 3); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return // and the process exits
	}
	defer w.Close()
	defer c.Free()
	if _, err := wc.Recv(ctx, make([]byte, 1), 1, 3); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // rank 1 is in Close, or would have exited
	if _, err := c.Recv(ctx, small, peer, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RecvTyped(ctx, typed, 1, vt, peer, 2); err != nil {
		t.Fatal(err)
	}
	checkStaged(t, small, typed, 5, 11)
}

// The staged messages of the linger tests: a byte message (small) and
// the blocks of a vector of stagedBlocks blocks of stagedBlk bytes at a
// stride of stagedStride (typed), byte i being i·a and i·b.
const stagedBlocks, stagedBlk, stagedStride = 1024, 64, 128 // 64 KiB packed: staged, above the eager limit

// stagedMessages returns the vector type of the typed message and
// buffers for both messages (the byte message of 8000 bytes goes by
// staged rendezvous, below the eager limit).
func stagedMessages(t *testing.T) (vt *ddt.Type, small, typed []byte) {
	t.Helper()
	vt, err := ddt.Vector(stagedBlocks, stagedBlk, stagedStride, ddt.Byte)
	if err == nil {
		err = vt.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	return vt, make([]byte, 8000), make([]byte, stagedBlocks*stagedStride)
}

func fillStaged(small, typed []byte, a, b int) {
	for i := range small {
		small[i] = byte(i * a)
	}
	for i := range typed {
		typed[i] = byte(i * b)
	}
}

func checkStaged(t *testing.T, small, typed []byte, a, b int) {
	t.Helper()
	for i := range small {
		if small[i] != byte(i*a) {
			t.Fatalf("byte message: byte %d = %d, want %d", i, small[i], byte(i*a))
		}
	}
	for k := 0; k < stagedBlocks; k++ {
		for j := 0; j < stagedBlk; j++ {
			if i := k*stagedStride + j; typed[i] != byte(i*b) {
				t.Fatalf("typed message: byte %d = %d, want %d", i, typed[i], byte(i*b))
			}
		}
	}
}
