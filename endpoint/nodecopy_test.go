package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/launchtest"
	"github.com/weft-hpc/weft/internal/settings"
	"github.com/weft-hpc/weft/internal/testenv"
)

// copyEnv is the environment of ranks that use the pipelined copy from
// 64 KiB on in 16 KiB fragments (4 to a round), so that small messages
// take several rounds, for every large blocking send (nodeway=pipe, not
// the faster way the link measures); a WEFT_TUNE of the test's own that
// sets the copy knobs is kept as it is.
func copyEnv() []string {
	tu := os.Getenv(settings.TuneEnv)
	if strings.Contains(tu, "nodecopy") {
		return nil
	}
	return []string{settings.TuneEnv + "=" + copyTune(tu) + ",nodecopy=64K,nodecopyslot=16K,nodeway=pipe"}
}

// copyTune is WEFT_TUNE value tu without its epwait: waits told to yield
// treat the node as crowded, where the pipelined copy these tests
// exercise is off, so their ranks wait as the machine decides.
func copyTune(tu string) string {
	var keep []string
	for _, kv := range strings.Split(tu, ",") {
		if k, _, _ := strings.Cut(kv, "="); strings.TrimSpace(strings.ToLower(k)) != "epwait" {
			keep = append(keep, kv)
		}
	}
	return strings.Join(keep, ",")
}

// copyLimits returns the copy slot size and the smallest message of the
// pipelined copy, skipping the test when the copy path is off.
func copyLimits(t *testing.T) (slot, cp int) {
	t.Helper()
	tu, err := settings.Tune()
	if err != nil {
		t.Fatal(err)
	}
	slot, cp = (int(tu.NodeCopySlot)+63)&^63, int(tu.NodeCopy)
	if cp <= 0 {
		testenv.Skip(t, "nodecopy", "WEFT_TUNE nodecopy=0: no pipelined copy")
	}
	return slot, cp
}

// launchCopy runs the calling test as two ranks on the node transport
// with copyEnv's copy knobs, or returns false in a worker.
func launchCopy(t *testing.T) bool {
	t.Helper()
	if launchtest.IsWorker() {
		return false
	}
	skipRepeatPass(t)
	prov, env := provEnv("native", copyEnv())
	launchtest.Run(t, 2, prov, 60*time.Second, env...)
	return true
}

// TestNodeCopy: two processes exchange messages by the pipelined copy
// through the pair's copy area (WEFT_TUNE nodecopy on). Messages one byte
// either side of the copy's smallest size and of whole rounds of slots
// arrive byte for byte, posted first and unexpected. A burst of messages
// of every protocol (copy, inline, medium, rendezvous) to one tag, sent
// while the receiver does not drive its endpoint, so that the first copy
// stalls with its slots full and the later large messages find the copy
// busy, arrives complete and in order by AnySource, the first one seen by
// Probe with its full size; a copy into a smaller posted or unexpected
// receive reports truncation with the bytes that fitted; a receive
// cancelled before the message came does not take it.
func TestNodeCopy(t *testing.T) {
	if launchCopy(t) {
		return
	}
	slot, cp := copyLimits(t)
	ctx := eptest.Ctx(t, 45*time.Second)
	w := initWorld(t)
	c := w.Comm()
	if tr, _ := c.Transport(1 - c.Rank()); tr != endpoint.TransportNode {
		t.Fatalf("peer reached through %s", tr)
	}
	var err error
	burst := []int{cp, 100, 8000, cp / 2, 9*slot + 7, 50, cp}
	sizes := []int{cp - 1, cp, cp + 1, 4*slot - 1, 4*slot + 1, 8*slot + 1}
	const tagBurst, tagGo, tagTrunc, tagCancel, tagSizes = 1, 2, 3, 4, 5
	// Sizes, posted first (rank 0 posts, then asks for the message) and
	// unexpected (sent before rank 0 receives, its arrival made sure of
	// by Probe).
	for i, n := range sizes {
		for _, posted := range []bool{true, false} {
			if c.Rank() == 1 {
				if posted {
					if _, err := c.Recv(ctx, nil, 0, tagGo); err != nil {
						t.Fatal(err)
					}
				}
				m := make([]byte, n)
				pattern(m, 1, 0, 300+i)
				if err := c.Send(ctx, m, 0, tagSizes); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got := make([]byte, n+1)
			var r *endpoint.Request
			if posted {
				if r, err = c.Irecv(got, 1, tagSizes); err != nil {
					t.Fatal(err)
				}
				if err := c.Send(ctx, nil, 1, tagGo); err != nil {
					t.Fatal(err)
				}
			} else {
				if st, err := c.Probe(ctx, 1, tagSizes); err != nil || st.Count != n {
					t.Fatalf("Probe of %d bytes: %+v %v", n, st, err)
				}
				if r, err = c.Irecv(got, 1, tagSizes); err != nil {
					t.Fatal(err)
				}
			}
			st, err := r.Wait(ctx)
			want := make([]byte, n)
			pattern(want, 1, 0, 300+i)
			if err != nil || st.Count != n || !bytes.Equal(got[:n], want) {
				t.Fatalf("%d bytes (posted %v): status %+v, err %v", n, posted, st, err)
			}
		}
	}
	viaCopy := int64(0)
	for _, n := range sizes {
		if n >= cp {
			viaCopy += 2
		}
	}
	if c.Rank() == 1 {
		if copies, _ := endpoint.CopyCounts(c, 0); copies != viaCopy {
			t.Fatalf("%d messages went by the pipelined copy, want %d (those of at least %d bytes)", copies, viaCopy, cp)
		}
	}
	if c.Rank() == 1 {
		if _, err := c.Recv(ctx, nil, 0, tagGo); err != nil {
			t.Fatal(err)
		}
		var reqs []*endpoint.Request
		for i, n := range burst {
			m := make([]byte, n)
			pattern(m, 1, 0, i)
			r, err := c.Isend(m, 0, tagBurst)
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, r)
		}
		if err := endpoint.WaitAll(ctx, reqs...); err != nil {
			t.Fatal(err)
		}
		copies, _ := endpoint.CopyCounts(c, 0)
		if copies < viaCopy+1 {
			t.Fatalf("%d messages went by the pipelined copy, want at least the first of the burst", copies)
		}
		for i := 0; i < 2; i++ { // truncated: posted first, then unexpected
			m := make([]byte, cp)
			pattern(m, 1, 0, 100+i)
			if err := c.Send(ctx, m, 0, tagTrunc); err != nil {
				t.Fatal(err)
			}
		}
		m := make([]byte, cp)
		pattern(m, 1, 0, 200)
		if _, err := c.Recv(ctx, nil, 0, tagGo); err != nil { // rank 0 cancelled
			t.Fatal(err)
		}
		if err := c.Send(ctx, m, 0, tagCancel); err != nil {
			t.Fatal(err)
		}
		if err := c.Barrier(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
	defer w.Close()
	if err := c.Send(ctx, nil, 1, tagGo); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the burst is sent to an idle receiver
	st, err := c.Probe(ctx, endpoint.AnySource, tagBurst)
	if err != nil || st.Count != burst[0] || st.Source != 1 {
		t.Fatalf("Probe: %+v %v, want %d bytes from rank 1", st, err, burst[0])
	}
	for i, n := range burst {
		got := make([]byte, slices.Max(burst)+1)
		st, err := c.Recv(ctx, got, endpoint.AnySource, tagBurst)
		want := make([]byte, n)
		pattern(want, 1, 0, i)
		if err != nil || st.Count != n || !bytes.Equal(got[:n], want) {
			t.Fatalf("message %d of the burst (%d bytes): status %+v, err %v, data equal %v", i, n, st, err, bytes.Equal(got[:min(n, st.Count)], want[:min(n, st.Count)]))
		}
	}

	small := make([]byte, cp/3)
	r, err := c.Irecv(small, 1, tagTrunc)
	if err != nil {
		t.Fatal(err)
	}
	st, err = r.Wait(ctx)
	checkTrunc(t, "posted", small, 100, st, err)
	time.Sleep(50 * time.Millisecond) // arrives unexpected
	if st, err := c.Probe(ctx, 1, tagTrunc); err != nil || st.Count != cp {
		t.Fatalf("Probe: %+v %v, want %d bytes", st, err, cp)
	}
	small = make([]byte, cp-1)
	st, err = c.Recv(ctx, small, 1, tagTrunc)
	checkTrunc(t, "unexpected", small, 101, st, err)

	cancelled := make([]byte, cp)
	r, err = c.Irecv(cancelled, 1, tagCancel)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Wait(ctx); !errors.Is(err, endpoint.ErrCanceled) || !st.Canceled {
		t.Fatalf("cancelled receive: %+v %v", st, err)
	}
	if err := c.Send(ctx, nil, 1, tagGo); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, cp)
	if st, err := c.Recv(ctx, got, 1, tagCancel); err != nil || st.Count != cp {
		t.Fatalf("receive after a cancel: %+v %v", st, err)
	}
	want := make([]byte, cp)
	pattern(want, 1, 0, 200)
	if !bytes.Equal(got, want) || !bytes.Equal(cancelled, make([]byte, cp)) {
		t.Fatal("the message after a cancelled receive went astray")
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkTrunc checks a truncated receive of a copy message of salt salt.
func checkTrunc(t *testing.T, what string, got []byte, salt int, st endpoint.Status, err error) {
	t.Helper()
	_, cp := copyLimits(t)
	want := make([]byte, cp)
	pattern(want, 1, 0, salt)
	if !errors.Is(err, endpoint.ErrTruncated) || st.Count != len(got) || !bytes.Equal(got, want[:len(got)]) {
		t.Fatalf("%s truncated receive of %d bytes into %d: status %+v, err %v", what, cp, len(got), st, err)
	}
}

// TestNodeCopyPeerDies: a process killed in the middle of a pipelined
// copy, its slots half filled: the sender's death fails the posted
// receive (from AnySource), the receiver's death fails the send, each
// with ErrPeerGone within the timeout, never a hang or a corrupt delivery.
func TestNodeCopyPeerDies(t *testing.T) {
	for _, dies := range []int{1, 0} {
		name := map[int]string{1: "sender", 0: "receiver"}[dies]
		t.Run(name, func(t *testing.T) {
			if !launchtest.IsWorker() {
				skipRepeatPass(t)
				prov, env := provEnv("native", append(copyEnv(), endpoint.EnvTimeout+"=60s"))
				launchtest.RunMayDie(t, 2, prov, 60*time.Second, []int{dies}, env...)
				return
			}
			slot, cp := copyLimits(t)
			ctx := eptest.Ctx(t, 45*time.Second)
			w := initWorld(t)
			c := w.Comm()
			msg := make([]byte, max(cp, 12*slot)) // three rounds of the slots
			if c.Rank() == 0 {                    // the receiver
				if dies != 0 {
					defer w.Close()
				}
				// AnySource: only the copy's own watch on its peer, not
				// Wait's on a receive's source, can fail it.
				r, err := c.Irecv(msg, endpoint.AnySource, 1)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Send(ctx, nil, 1, 2); err != nil {
					t.Fatal(err)
				}
				if dies == 0 {
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {}
				}
				// Not driving the endpoint: the sender fills one round of
				// slots, then dies.
				time.Sleep(300 * time.Millisecond)
				start := time.Now()
				st, err := r.Wait(ctx)
				if took := time.Since(start); !errors.Is(err, endpoint.ErrPeerGone) || took > 20*time.Second {
					t.Fatalf("receive of a copy whose sender died: status %+v, %v after %v; want ErrPeerGone", st, err, took)
				}
				t.Logf("receive failed after %v: %v", time.Since(start), err)
				return
			}
			if dies != 1 {
				defer w.Close()
			}
			if _, err := c.Recv(ctx, nil, 0, 2); err != nil {
				t.Fatal(err)
			}
			// A blocking Send takes the pipelined copy whatever the
			// message's size; the receiver does not drive its endpoint
			// yet, so it copies one round of fragments and waits.
			if dies == 1 {
				go func() { _ = c.Send(ctx, msg, 0, 1) }()
				for deadline := time.Now().Add(10 * time.Second); !endpoint.CopyInProgress(c, 0); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("no pipelined copy of %d bytes in progress (fragments of %d)", len(msg), slot)
					}
				}
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			start := time.Now()
			err := c.Send(ctx, msg, 0, 1)
			if took := time.Since(start); !errors.Is(err, endpoint.ErrPeerGone) || took > 20*time.Second {
				t.Fatalf("send of a copy whose receiver died: %v after %v; want ErrPeerGone", err, took)
			}
			t.Logf("send failed after %v: %v", time.Since(start), err)
		})
	}
}

// TestNodeCopyTyped: typed messages through the pipelined copy, packed
// straight into the slots and unpacked straight out of them. A blocking
// SendTyped of a strided layout (several rounds of slots) is received as
// contiguous float64s, as another strided layout and into a smaller
// buffer (truncation); an IsendTyped that fits the free slots takes the
// copy too, one that does not takes another path; a receive with another
// type signature fails with ErrInvalid. Every byte is checked.
func TestNodeCopyTyped(t *testing.T) {
	if launchCopy(t) {
		return
	}
	slot, cp := copyLimits(t)
	ctx := eptest.Ctx(t, 45*time.Second)
	w := initWorld(t)
	defer w.Close()
	c := w.Comm()
	vec := func(n, stride int, old *ddt.Type) *ddt.Type {
		ty, err := committed(ddt.Vector(n, 1, stride, old))
		if err != nil {
			t.Fatal(err)
		}
		return ty
	}
	// n elements: more than three rounds of the slots; fit: exactly the
	// four free slots (an Isend of it completes within the call).
	n := max(cp, 13*slot) / 8
	fit := 4 * slot / 8
	strided3, strided2 := vec(n, 3, ddt.Float64), vec(n, 2, ddt.Float64)
	fitType := vec(fit, 3, ddt.Float64)
	src := make([]byte, 3*8*n)
	pattern(src, 1, 0, 7)
	// want is the packed stream: every third float64 of src.
	want := make([]byte, 8*n)
	for i := range n {
		copy(want[8*i:8*i+8], src[24*i:24*i+8])
	}
	// Blocks of a slot and a half, which the node transport would gather
	// with process_vm_readv from an Isend: a blocking send packs them
	// into the slots, pieces of blocks at the fragments' edges.
	blk := 3 * slot / 16
	bigBlocks := func(gap int) *ddt.Type {
		ty, err := committed(ddt.Vector(5, blk, blk+gap, ddt.Float64))
		if err != nil {
			t.Fatal(err)
		}
		return ty
	}
	const tagContig, tagStrided, tagTrunc, tagFit, tagBig, tagMismatch, tagGo, tagBlocks = 1, 2, 3, 4, 5, 6, 7, 8
	if c.Rank() == 1 {
		if _, err := c.Recv(ctx, nil, 0, tagGo); err != nil {
			t.Fatal(err)
		}
		before, _ := endpoint.CopyCounts(c, 0)
		for _, tag := range []int{tagContig, tagStrided, tagTrunc} {
			if err := c.SendTyped(ctx, src, 1, strided3, 0, tag); err != nil {
				t.Fatalf("SendTyped tag %d: %v", tag, err)
			}
		}
		if got, _ := endpoint.CopyCounts(c, 0); got != before+3 {
			t.Fatalf("%d blocking typed sends went by the pipelined copy, want 3", got-before)
		}
		if _, err := c.Recv(ctx, nil, 0, tagGo); err != nil { // rank 0 has drained the slots
			t.Fatal(err)
		}
		r, err := c.IsendTyped(src, 1, fitType, 0, tagFit)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := endpoint.CopyCounts(c, 0); got != before+4 {
			t.Fatalf("an IsendTyped of %d bytes did not take the free slots of %d bytes", 8*fit, 4*slot)
		}
		if _, err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		r, err = c.IsendTyped(src, 1, strided3, 0, tagBig)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := endpoint.CopyCounts(c, 0); got != before+4 {
			t.Fatalf("an IsendTyped of %d bytes took the pipelined copy (%d bytes of slots)", 8*n, 4*slot)
		}
		if err := c.SendTyped(ctx, src, 1, strided3, 0, tagMismatch); err != nil {
			t.Fatal(err)
		}
		bsrc := make([]byte, 8*(5*(blk+3)))
		pattern(bsrc, 3, 0, 11)
		if err := c.SendTyped(ctx, bsrc, 1, bigBlocks(3), 0, tagBlocks); err != nil {
			t.Fatal(err)
		}
		if got, _ := endpoint.CopyCounts(c, 0); got != before+6 {
			t.Fatalf("a blocking send of blocks of %d bytes did not take the pipelined copy", 8*blk)
		}
		return
	}
	if err := c.Send(ctx, nil, 1, tagGo); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8*n)
	if st, err := c.RecvTyped(ctx, got, n, ddt.Float64, 1, tagContig); err != nil || st.Count != 8*n || !bytes.Equal(got, want) {
		t.Fatalf("strided into contiguous: %+v %v, bytes equal %v", st, err, bytes.Equal(got, want))
	}
	got2 := make([]byte, 2*8*n)
	if st, err := c.RecvTyped(ctx, got2, 1, strided2, 1, tagStrided); err != nil || st.Count != 8*n {
		t.Fatalf("strided into strided: %+v %v", st, err)
	}
	for i := range n {
		if !bytes.Equal(got2[16*i:16*i+8], want[8*i:8*i+8]) || !bytes.Equal(got2[16*i+8:16*i+16], make([]byte, 8)) {
			t.Fatalf("strided into strided: element %d wrong, or a gap written", i)
		}
	}
	small := make([]byte, 8*(n/3))
	if st, err := c.RecvTyped(ctx, small, n/3, ddt.Float64, 1, tagTrunc); !errors.Is(err, endpoint.ErrTruncated) || st.Count != len(small) || !bytes.Equal(small, want[:len(small)]) {
		t.Fatalf("truncated: %+v %v", st, err)
	}
	if err := c.Send(ctx, nil, 1, tagGo); err != nil {
		t.Fatal(err)
	}
	got = make([]byte, 8*fit)
	wantFit := want[:8*fit]
	if st, err := c.RecvTyped(ctx, got, fit, ddt.Float64, 1, tagFit); err != nil || st.Count != 8*fit || !bytes.Equal(got, wantFit) {
		t.Fatalf("Isend that fit the slots: %+v %v", st, err)
	}
	got = make([]byte, 8*n)
	if st, err := c.RecvTyped(ctx, got, n, ddt.Float64, 1, tagBig); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Isend larger than the slots: %+v %v", st, err)
	}
	if _, err := c.RecvTyped(ctx, make([]byte, 8*n), 2*n, ddt.Int32, 1, tagMismatch); !errors.Is(err, endpoint.ErrInvalid) {
		t.Fatalf("float64s received as int32s: %v, want ErrInvalid", err)
	}
	bsrc := make([]byte, 8*(5*(blk+3)))
	pattern(bsrc, 3, 0, 11)
	bgot := make([]byte, 8*(5*(blk+7)))
	if st, err := c.RecvTyped(ctx, bgot, 1, bigBlocks(7), 1, tagBlocks); err != nil || st.Count != 8*5*blk {
		t.Fatalf("big blocks: %+v %v", st, err)
	}
	for b := range 5 {
		at, from := 8*b*(blk+7), 8*b*(blk+3)
		if !bytes.Equal(bgot[at:at+8*blk], bsrc[from:from+8*blk]) || !bytes.Equal(bgot[at+8*blk:at+8*(blk+7)], make([]byte, 56)) {
			t.Fatalf("big blocks: block %d wrong, or its gap written", b)
		}
	}
}

// TestNodeCopyFragments: with the default copy slots (256 KiB), a
// contiguous message of up to four slots goes in at least four fragments
// of whole pages (16 KiB at least), so that the copies in and out
// overlap; larger ones in whole slots, and a typed message in whole
// slots whatever its size. Every message, blocking or from an Isend that
// fits the free slots, arrives byte for byte, and the sender's fragment
// count matches those sizes.
func TestNodeCopyFragments(t *testing.T) {
	if !launchtest.IsWorker() {
		skipRepeatPass(t)
		if strings.Contains(os.Getenv(settings.TuneEnv), "nodecopy") {
			testenv.Skip(t, "nodecopy", "WEFT_TUNE sets the copy knobs this test sets itself")
		}
		prov, env := provEnv("native", []string{settings.TuneEnv + "=" + copyTune(os.Getenv(settings.TuneEnv)) + ",nodecopy=16K,nodecopyslot=256K,nodeway=pipe"})
		launchtest.Run(t, 2, prov, 60*time.Second, env...)
		return
	}
	slot, _ := copyLimits(t)
	ctx := eptest.Ctx(t, 45*time.Second)
	w := initWorld(t)
	c := w.Comm()
	frag := func(n int) int { // a quarter, in whole pages, 16 KiB to a slot
		f := ((n+3)/4 + 4095) &^ 4095
		return min(slot, max(f, 16<<10))
	}
	sizes := []int{20 << 10, 64 << 10, 100<<10 + 3, slot - 1, slot, slot + 1, 4*slot + 5}
	const tagSizes, tagIsend, tagTyped, tagGo = 1, 2, 3, 4
	want := int64(0)
	for i, n := range sizes {
		m := make([]byte, n)
		if c.Rank() == 1 {
			pattern(m, 1, 0, 700+i)
			if err := c.Send(ctx, m, 0, tagSizes); err != nil {
				t.Fatal(err)
			}
			want += int64((n + frag(n) - 1) / frag(n))
			continue
		}
		if _, err := c.Recv(ctx, m, 1, tagSizes); err != nil {
			t.Fatal(err)
		}
		exp := make([]byte, n)
		pattern(exp, 1, 0, 700+i)
		if !bytes.Equal(m, exp) {
			t.Fatalf("%d bytes: data differ", n)
		}
	}
	// An Isend of 64 KiB fits the free slots in four fragments: rank 0
	// has copied every fragment before out (its go message).
	n := 64 << 10
	m := make([]byte, n)
	if c.Rank() == 1 {
		if _, err := c.Recv(ctx, nil, 0, tagGo); err != nil {
			t.Fatal(err)
		}
		pattern(m, 1, 0, 800)
		r, err := c.Isend(m, 0, tagIsend)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		want += 4
	} else {
		if err := c.Send(ctx, nil, 1, tagGo); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Recv(ctx, m, 1, tagIsend); err != nil {
			t.Fatal(err)
		}
		exp := make([]byte, n)
		pattern(exp, 1, 0, 800)
		if !bytes.Equal(m, exp) {
			t.Fatal("Isend of 64 KiB: data differ")
		}
	}
	// Typed messages (copyFragTyped): 48 KiB of doubles, every other one,
	// go whole in one slot; 96 KiB in three blocks of 32 KiB, and 80 KiB
	// of every other double, in copyFrag's fragments.
	typedCases := []struct {
		name       string
		n, stride  int // doubles: n blocks of blk, stride apart
		blk, frags int
	}{
		{"small blocks, 48 KiB", 6 << 10, 2, 1, 1},
		{"three blocks of 32 KiB", 3, 5 << 10, 4 << 10, 4},
		{"small blocks, 80 KiB", 10 << 10, 2, 1, 4},
	}
	for i, tc := range typedCases {
		ty, err := committed(ddt.Vector(tc.n, tc.blk, tc.stride, ddt.Float64))
		if err != nil {
			t.Fatal(err)
		}
		size := 8 * tc.n * tc.blk
		if got := frag(size); tc.frags > 1 && (size+got-1)/got != tc.frags {
			t.Fatalf("%s: copyFrag makes %d fragments, the case says %d", tc.name, (size+got-1)/got, tc.frags)
		}
		buf := make([]byte, 8*tc.n*tc.stride)
		if c.Rank() == 1 {
			pattern(buf, 1, 0, 900+i)
			if err := c.SendTyped(ctx, buf, 1, ty, 0, tagTyped); err != nil {
				t.Fatal(err)
			}
			want += int64(tc.frags)
			if got := endpoint.CopyFragments(c, 0); got != want {
				t.Fatalf("%s: the pipelined copies took %d fragments, want %d", tc.name, got, want)
			}
			continue
		}
		packed := make([]byte, size)
		if _, err := c.Recv(ctx, packed, 1, tagTyped); err != nil {
			t.Fatal(err)
		}
		src := make([]byte, len(buf))
		pattern(src, 1, 0, 900+i)
		for j := 0; j < tc.n; j++ {
			b := 8 * tc.blk
			if !bytes.Equal(packed[j*b:(j+1)*b], src[8*tc.stride*j:8*tc.stride*j+b]) {
				t.Fatalf("%s: block %d differs", tc.name, j)
			}
		}
	}
	// A receive that times out says what it waited for and what arrived:
	// nothing from rank 1 (its node ring is empty).
	if c.Rank() == 0 {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := c.Recv(short, make([]byte, 8), 1, 99)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "from rank 1, tag 99; that rank's node ring is empty") {
			t.Fatalf("Recv from a rank that sends nothing: %v, want its deadline and the empty ring named", err)
		}
		// WaitAll says how many of its requests are pending and what the
		// first waits for.
		r1, err := c.Irecv(make([]byte, 8), 1, 98)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := c.Irecv(make([]byte, 8), 1, 99)
		if err != nil {
			t.Fatal(err)
		}
		short, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
		err = endpoint.WaitAll(short, nil, r1, r2)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "2 of 3 requests pending, the first a receive (from rank 1, tag 98; that rank's node ring is empty") {
			t.Fatalf("WaitAll on receives from a rank that sends nothing: %v, want its deadline, the pending count and the first receive named", err)
		}
		for _, r := range []*endpoint.Request{r1, r2} {
			if err := r.Cancel(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNodeWay: blocking sends of 1 MiB, then Isends of 64 KiB, between two
// processes, with WEFT_TUNE's nodeway auto (both ways tried and timed, the
// faster kept, so some go by the pipelined copy and some by the single
// copy), pipe (all by the pipelined copy) and single (none). Every message
// arrives byte for byte and in order.
func TestNodeWay(t *testing.T) {
	tu := os.Getenv(settings.TuneEnv)
	if !launchtest.IsWorker() {
		skipRepeatPass(t)
		if strings.Contains(tu, "nodecopy") || strings.Contains(tu, "nodeway") {
			testenv.Skip(t, "nodeway", "WEFT_TUNE sets the copy knobs this test sets itself")
		}
	}
	for _, way := range []string{"auto", "pipe", "single"} {
		t.Run(way, func(t *testing.T) {
			if !launchtest.IsWorker() {
				prov, env := provEnv("native", []string{settings.TuneEnv + "=" + copyTune(tu) + ",nodecopy=16K,nodeway=" + way})
				launchtest.Run(t, 2, prov, 60*time.Second, env...)
				return
			}
			nodeWayRank(t, way)
		})
	}
}

// nodeWayRank is one rank of TestNodeWay with nodeway set to way.
func nodeWayRank(t *testing.T, way string) {
	const n, k = 1 << 20, 24
	ctx := eptest.Ctx(t, 45*time.Second)
	w := initWorld(t)
	c := w.Comm()
	if tr, _ := c.Transport(1 - c.Rank()); tr != endpoint.TransportNode {
		t.Fatalf("peer reached through %s", tr)
	}
	m := make([]byte, n)
	for i := 0; i < k; i++ {
		if c.Rank() == 1 {
			pattern(m, 1, 0, i)
			if err := c.Send(ctx, m, 0, i); err != nil {
				t.Fatal(err)
			}
			continue
		}
		st, err := c.Recv(ctx, m, 1, endpoint.AnyTag)
		want := make([]byte, n)
		pattern(want, 1, 0, i)
		if err != nil || st.Tag != i || st.Count != n || !bytes.Equal(m, want) {
			t.Fatalf("message %d: status %+v, err %v, bytes equal %v", i, st, err, bytes.Equal(m, want))
		}
	}
	copies, _ := endpoint.CopyCounts(c, 0) // the blocking sends'
	// Isends of 64 KiB (which fit in the free copy slots) are timed too.
	const isendN = 64 << 10
	for i := 0; i < 8; i++ {
		if c.Rank() == 1 {
			pattern(m[:isendN], 1, 0, 100+i)
			r, err := c.Isend(m[:isendN], 0, 100+i)
			if err == nil {
				_, err = r.Wait(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		got := m[:isendN]
		st, err := c.Recv(ctx, got, 1, 100+i)
		want := make([]byte, isendN)
		pattern(want, 1, 0, 100+i)
		if err != nil || st.Count != isendN || !bytes.Equal(got, want) {
			t.Fatalf("Isend %d: status %+v, err %v, bytes equal %v", i, st, err, bytes.Equal(got, want))
		}
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Rank() == 0 {
		return
	}
	if p, s, _ := endpoint.WayEstimates(c, 0, isendN); way == "auto" && (p <= 0 || s <= 0) {
		t.Errorf("auto: Isends of %d bytes left the estimates at %v and %v: want both ways timed", isendN, p, s)
	}
	pipe, single, _ := endpoint.WayEstimates(c, 0, n)
	t.Logf("%d of %d by the pipelined copy; ns per byte: pipelined %.4f, single %.4f", copies, k, pipe, single)
	switch way {
	case "auto":
		if copies < 1 || copies > k-1 || pipe <= 0 || single <= 0 {
			t.Errorf("auto: %d of %d sends by the pipelined copy, estimates %v and %v: want both ways tried and timed", copies, k, pipe, single)
		}
	case "pipe":
		if copies != k || single != 0 {
			t.Errorf("pipe: %d of %d sends by the pipelined copy, single copy estimate %v", copies, k, single)
		}
	case "single":
		if copies != 0 || pipe != 0 {
			t.Errorf("single: %d sends by the pipelined copy, its estimate %v", copies, pipe)
		}
	}
}

// TestNodeFill: a link times its typed pipelined sends both ways (packed
// into the slots, packed privately and streamed) and keeps estimates of
// both; every message, whichever way its fragments took, arrives byte
// for byte.
func TestNodeFill(t *testing.T) {
	if launchCopy(t) {
		return
	}
	const n, k = 1 << 17, 16 // float64s of the packed stream (1 MiB), messages
	ctx := eptest.Ctx(t, 45*time.Second)
	w := initWorld(t)
	defer w.Close()
	c := w.Comm()
	strided, err := committed(ddt.Vector(n, 1, 3, ddt.Float64))
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, 3*8*n)
	got := make([]byte, 8*n)
	want := make([]byte, 8*n)
	for i := range k {
		if c.Rank() == 1 {
			pattern(src, 1, 0, i)
			if err := c.SendTyped(ctx, src, 1, strided, 0, i); err != nil {
				t.Fatalf("SendTyped %d: %v", i, err)
			}
			continue
		}
		pattern(src, 1, 0, i)
		for j := range n {
			copy(want[8*j:8*j+8], src[24*j:24*j+8])
		}
		if st, err := c.RecvTyped(ctx, got, n, ddt.Float64, 1, i); err != nil || st.Count != 8*n || !bytes.Equal(got, want) {
			t.Fatalf("message %d: %+v %v, bytes equal %v", i, st, err, bytes.Equal(got, want))
		}
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Rank() == 0 {
		return
	}
	copies, _ := endpoint.CopyCounts(c, 0)
	plain, stream, _ := endpoint.FillEstimates(c, 0, 8*n)
	t.Logf("%d of %d by the pipelined copy; ns per byte: plain %.4f, streamed %.4f", copies, k, plain, stream)
	if copies != k || plain <= 0 || stream <= 0 {
		t.Errorf("%d of %d typed sends by the pipelined copy, estimates plain %v, streamed %v: want every send piped and both ways timed", copies, k, plain, stream)
	}
}
