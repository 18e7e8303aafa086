package endpoint_test

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
)

// TestNodePipelinePeerDies: the sender of a pipelined typed message over
// the node transport (packed and published a piece at a time behind its
// header) is killed after its second piece, while the receiver, which
// matched the header first, copies and unpacks the pieces. The receive
// fails with ErrPeerGone within its timeout: no hang, and no success
// reported for a message that was never whole.
func TestNodePipelinePeerDies(t *testing.T) {
	if !launchtest.IsWorker() {
		skipRepeatPass(t)
		prov, env := provEnv("native", []string{endpoint.EnvTimeout + "=60s"})
		launchtest.RunMayDie(t, 2, prov, 60*time.Second, []int{1}, env...)
		return
	}
	ctx := eptest.Ctx(t, 45*time.Second)
	w, err := endpoint.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := w.Comm()
	if tr, _ := c.Transport(1 - c.Rank()); tr != endpoint.TransportNode {
		t.Fatalf("peer reached through %s", tr)
	}
	const nf = 1 << 20 // 8 MiB of 8-byte blocks: 32 pieces of 256 KiB
	typ, err := committed(ddt.Vector(nf, 1, 2, ddt.Float64))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16*nf)
	if c.Rank() == 1 {
		for i := range buf {
			buf[i] = byte(i)
		}
		pieces := 0
		endpoint.SetPipePieceHook(func(off, n int) {
			if pieces++; pieces == 2 {
				if off >= n {
					t.Errorf("a pipelined send of %d bytes packed whole in two pieces", n)
				}
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		})
		if _, err := c.Recv(ctx, make([]byte, 1), 0, 1); err != nil {
			t.Fatal(err)
		}
		_, err := c.IsendTyped(buf, 1, typ, 0, 2)
		t.Fatalf("the pipelined send returned (%v) instead of being killed after its second piece", err)
	}
	defer w.Close()
	rr, err := c.IrecvTyped(buf, 1, typ, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, []byte{1}, 1, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st, err := rr.Wait(ctx)
	took := time.Since(start)
	if !errors.Is(err, endpoint.ErrPeerGone) || took > 20*time.Second {
		t.Fatalf("receive of a pipelined message whose sender died: status %+v, %v after %v; want ErrPeerGone", st, err, took)
	}
	t.Logf("receive returned after %v: %v", took, err)
}
