package endpoint_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// column returns the committed type of one column of a rows×cols float64
// matrix stored by rows (a vector of rows blocks of 1, stride cols).
func column(t testing.TB, rows, cols int) *ddt.Type {
	t.Helper()
	c, err := ddt.Vector(rows, 1, cols, ddt.Float64)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	return c
}

func f64s(b []byte) []float64 {
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func putF64s(b []byte, v func(i int) float64) {
	for i := 0; i < len(b)/8; i++ {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v(i)))
	}
}

// srcMatrix is the rows×cols float64 matrix the typed tests send from.
func srcMatrix(rows, cols int) []byte {
	m := make([]byte, rows*cols*8)
	putF64s(m, func(i int) float64 { return float64(i) + 0.5 })
	return m
}

func at(m []byte, cs, r, k int) float64 {
	return math.Float64frombits(binary.LittleEndian.Uint64(m[8*(r*cs+k):]))
}

func committed(t *ddt.Type, err error) (*ddt.Type, error) {
	if err != nil {
		return nil, err
	}
	return t, t.Commit()
}

// typedSend sends the last column of a rows×cols matrix to rank to four
// times (tags 1-4; the third time as a contiguous row), for typedRecv.
func typedSend(ctx context.Context, a *endpoint.Comm, to, rows, cols int) error {
	src := srcMatrix(rows, cols)
	k := cols - 1
	col, err := committed(ddt.Vector(rows, 1, cols, ddt.Float64))
	if err != nil {
		return err
	}
	row := make([]byte, rows*8)
	putF64s(row, func(r int) float64 { return at(src, cols, r, k) })
	for tag := 1; tag <= 4; tag++ {
		if tag == 3 {
			err = a.SendTyped(ctx, row, rows, ddt.Float64, to, tag)
		} else {
			err = a.SendTyped(ctx, src[8*k:], 1, col, to, tag)
		}
		if err != nil {
			return fmt.Errorf("send %d: %w", tag, err)
		}
	}
	return nil
}

// typedRecv receives typedSend's messages from rank from: the column as a
// contiguous row, as column 1 of a rows×cols2 matrix (another layout of
// the same data), the row into that column, and the column into one
// element fewer (truncation).
func typedRecv(ctx context.Context, b *endpoint.Comm, from, rows, cols, cols2 int) error {
	src := srcMatrix(rows, cols)
	k, j := cols-1, 1
	row := make([]byte, rows*8)
	st, err := b.RecvTyped(ctx, row, rows, ddt.Float64, from, 1)
	if err != nil || st.Count != rows*8 {
		return fmt.Errorf("column into row: %+v %v", st, err)
	}
	for r, x := range f64s(row) {
		if x != at(src, cols, r, k) {
			return fmt.Errorf("column into row: element %d = %v, want %v", r, x, at(src, cols, r, k))
		}
	}
	recvCol, err := committed(ddt.Vector(rows, 1, cols2, ddt.Float64))
	if err != nil {
		return err
	}
	for _, tag := range []int{2, 3} {
		dst := make([]byte, rows*cols2*8)
		st, err := b.RecvTyped(ctx, dst[8*j:], 1, recvCol, from, tag)
		if err != nil {
			return fmt.Errorf("tag %d into a column: %w", tag, err)
		}
		if n, err := st.CountOf(recvCol); err != nil || n != 1 {
			return fmt.Errorf("tag %d: CountOf = %d, %v", tag, n, err)
		}
		for r := 0; r < rows; r++ {
			for c := 0; c < cols2; c++ {
				want := 0.0
				if c == j {
					want = at(src, cols, r, k)
				}
				if got := at(dst, cols2, r, c); got != want {
					return fmt.Errorf("tag %d into a column: [%d][%d] = %v, want %v", tag, r, c, got, want)
				}
			}
		}
	}
	dst := make([]byte, rows*cols2*8)
	short := ddt.Float64
	n := rows - 1
	if rows > 1 {
		if short, err = committed(ddt.Vector(rows-1, 1, cols2, ddt.Float64)); err != nil {
			return err
		}
		n = 1
	}
	st, err = b.RecvTyped(ctx, dst, n, short, from, 4)
	if !errors.Is(err, endpoint.ErrTruncated) || st.Count != (rows-1)*8 {
		return fmt.Errorf("column into one element fewer: %+v %v", st, err)
	}
	for r := 0; r < rows-1; r++ {
		if got := at(dst, cols2, r, 0); got != at(src, cols, r, k) {
			return fmt.Errorf("truncated column: row %d = %v", r, got)
		}
	}
	return nil
}

// typedRows puts the packed column on both sides of the node transport's
// inline limit, the eager limit and well into rendezvous.
var typedRows = []int{1, 3, 255, 256, 257, 2047, 2048, 2049, 50000}

// TestTyped: typed messages between two endpoints of one process, on the
// node transport and on libfabric shm (TestTypedAcrossProcesses runs the
// interpreter and the JIT apart).
func TestTyped(t *testing.T) {
	for _, native := range []bool{true, false} {
		{
			t.Run(fmt.Sprintf("native=%v", native), func(t *testing.T) {
				a, b, ctx := singletonPair(t, endpoint.WithNodeTransport(native))
				for _, rows := range typedRows {
					errc := make(chan error, 1)
					go func() { errc <- typedSend(ctx, a, 1, rows, 5) }() // a has a goroutine of its own
					if err := typedRecv(ctx, b, 0, rows, 5, 3); err != nil {
						t.Fatalf("rows %d: %v", rows, err)
					}
					if err := <-errc; err != nil {
						t.Fatalf("rows %d: %v", rows, err)
					}
				}
			})
		}
	}
}

type particle struct {
	X, Y, Z float64
	ID      int32
	Kind    uint8
}

// TestTypedStructsAndProcNull: slices of structs go without their
// padding; ProcNull is accepted by every point-to-point call.
func TestTypedStructsAndProcNull(t *testing.T) {
	a, b, ctx := singletonPair(t)
	ps := make([]particle, 1000)
	for i := range ps {
		ps[i] = particle{X: float64(i), Y: -float64(i), Z: 0.25, ID: int32(i), Kind: uint8(i)}
	}
	r, err := endpoint.IsendOf(a, ps, 1, 9)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]particle, 1200)
	st, err := endpoint.RecvOf(ctx, b, got, 0, 9)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	pt, _ := ddt.Of[particle]()
	if n, err := st.CountOf(pt); err != nil || n != len(ps) || st.Count != len(ps)*(3*8+4+1) {
		t.Fatalf("CountOf = %d, %v; Count %d (the padding must not travel)", n, err, st.Count)
	}
	for i := range ps {
		if got[i] != ps[i] {
			t.Fatalf("particle %d: %+v, want %+v", i, got[i], ps[i])
		}
	}
	// ProcNull everywhere
	if r, err := a.Isend([]byte("x"), endpoint.ProcNull, 1); err != nil || !r.Done() {
		t.Fatalf("Isend to ProcNull: %v", err)
	}
	if err := a.Send(ctx, []byte("x"), endpoint.ProcNull, 1); err != nil {
		t.Fatal(err)
	}
	r, err = a.Irecv(make([]byte, 4), endpoint.ProcNull, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := r.Wait(ctx); err != nil || st.Source != endpoint.ProcNull || st.Count != 0 {
		t.Fatalf("Irecv from ProcNull: %+v %v", st, err)
	}
	if err := r.Cancel(); err != nil {
		t.Fatalf("Cancel of a ProcNull receive: %v", err)
	}
	if st, err := a.Recv(ctx, make([]byte, 4), endpoint.ProcNull, endpoint.AnyTag); err != nil || st.Source != endpoint.ProcNull {
		t.Fatalf("Recv from ProcNull: %+v %v", st, err)
	}
	if ok, st, err := a.Iprobe(endpoint.ProcNull, 3); !ok || err != nil || st.Source != endpoint.ProcNull {
		t.Fatalf("Iprobe ProcNull: %v %+v %v", ok, st, err)
	}
	st, err = a.Sendrecv(ctx, []byte("abcdefgh"), 1, ddt.Float64, endpoint.ProcNull, 1,
		make([]byte, 8), 1, ddt.Float64, endpoint.ProcNull, 1)
	if err != nil || st.Source != endpoint.ProcNull {
		t.Fatalf("Sendrecv with ProcNull: %+v %v", st, err)
	}
	// bad arguments
	if _, err := a.IsendTyped(make([]byte, 8), 1, nil, 1, 1); !errors.Is(err, endpoint.ErrInvalid) {
		t.Fatalf("nil type: %v", err)
	}
	if _, err := a.IsendTyped(make([]byte, 8), -1, ddt.Float64, 1, 1); !errors.Is(err, endpoint.ErrInvalid) {
		t.Fatalf("negative count: %v", err)
	}
	if _, err := a.IsendTyped(make([]byte, 8), 2, ddt.Float64, 1, 1); !errors.Is(err, ddt.ErrBounds) {
		t.Fatalf("2 float64 from 8 bytes: %v", err)
	}
	if _, err := b.IrecvTyped(make([]byte, 8*8), 1, column(t, 3, 4), 0, 1); !errors.Is(err, ddt.ErrBounds) {
		t.Fatalf("column past the buffer: %v", err)
	}
	uncommitted, _ := ddt.Vector(2, 1, 2, ddt.Float64)
	if _, err := a.IsendTyped(make([]byte, 64), 1, uncommitted, 1, 1); err == nil {
		t.Fatal("uncommitted type accepted")
	}
	// bad peers and tags on every typed path (inline, staged, gathered)
	for _, rows := range []int{2, 20, 100} {
		bt, err := blockType(rows, 64, 100)
		if err != nil {
			t.Fatal(err)
		}
		src := srcMatrix(rows, 100)
		for _, c := range []struct{ dest, tag int }{{1, -5}, {1, endpoint.TagUB + 1}, {2, 1}, {-3, 1}} {
			if _, err := a.IsendTyped(src, 1, bt, c.dest, c.tag); !errors.Is(err, endpoint.ErrInvalid) {
				t.Fatalf("rows %d, dest %d tag %d: %v", rows, c.dest, c.tag, err)
			}
			if _, err := a.IsendParts([]endpoint.Part{{Buf: src, Count: 1, Type: bt}}, c.dest, c.tag); !errors.Is(err, endpoint.ErrInvalid) {
				t.Fatalf("parts rows %d, dest %d tag %d: %v", rows, c.dest, c.tag, err)
			}
		}
	}
	if _, err := (endpoint.Status{Count: 12}).CountOf(ddt.Float64); !errors.Is(err, endpoint.ErrInvalid) {
		t.Fatalf("CountOf 12 bytes of float64: %v", err)
	}
}

// TestPersistent: a persistent halo-style exchange (a column each way)
// restarted 10 000 times moves the right data, allocates nothing per
// round once warm and does not grow the heap.
func TestPersistent(t *testing.T) {
	for _, native := range []bool{true, false} {
		a, b, ctx := singletonPair(t, endpoint.WithNodeTransport(native))
		const rows, cols = 64, 8
		ct := column(t, rows, cols)
		ma, mb := make([]byte, rows*cols*8), make([]byte, rows*cols*8)
		sa, err := a.SendInit(ma[8*(cols-1):], 1, ct, 1, 5)
		if err != nil {
			t.Fatal(err)
		}
		ra, err := a.RecvInit(ma, 1, ct, 1, 6)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := b.SendInit(mb[8*(cols-1):], 1, ct, 0, 6)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.RecvInit(mb, 1, ct, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		ps := []*endpoint.Persistent{ra, rb, sa, sb}
		reqs := make([]*endpoint.Request, len(ps))
		round := 0
		var ferr error
		step := func() {
			round++
			for r := 0; r < rows; r++ { // the columns the others will receive
				binary.LittleEndian.PutUint64(ma[8*(r*cols+cols-1):], uint64(round*1000+r))
				binary.LittleEndian.PutUint64(mb[8*(r*cols+cols-1):], uint64(round*2000+r))
			}
			if err := endpoint.StartAllInto(reqs, ps...); err != nil {
				ferr = err
				return
			}
			if err := endpoint.WaitAll(ctx, reqs...); err != nil {
				ferr = err
				return
			}
			for r := 0; r < rows; r++ {
				if got := binary.LittleEndian.Uint64(mb[8*r*cols:]); got != uint64(round*1000+r) {
					ferr = fmt.Errorf("round %d: b's halo row %d = %d", round, r, got)
				}
				if got := binary.LittleEndian.Uint64(ma[8*r*cols:]); got != uint64(round*2000+r) {
					ferr = fmt.Errorf("round %d: a's halo row %d = %d", round, r, got)
				}
			}
		}
		for i := 0; i < 100; i++ {
			step()
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		allocs := testing.AllocsPerRun(10000, step)
		runtime.GC()
		runtime.ReadMemStats(&after)
		if ferr != nil {
			t.Fatalf("native=%v: %v", native, ferr)
		}
		if allocs > 0 && !testenv.Race {
			t.Errorf("native=%v: %.2f allocations per round", native, allocs)
		}
		if grow := int64(after.HeapAlloc) - int64(before.HeapAlloc); grow > 1<<20 {
			t.Errorf("native=%v: heap grew %d bytes over 10 000 rounds", native, grow)
		}
		r, err := ra.Start()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ra.Start(); !errors.Is(err, endpoint.ErrInvalid) {
			t.Fatalf("restart of a receive in flight: %v", err)
		}
		if err := rb.Free(); err != nil {
			t.Fatal(err)
		}
		if _, err := rb.Start(); !errors.Is(err, endpoint.ErrInvalid) {
			t.Fatalf("start after Free: %v", err)
		}
		_ = r.Cancel()
		r.Wait(ctx)
	}
}

// typedProcs4 are the variants of TestTypedAcrossProcesses that run with
// 4 processes instead of 2.
var typedProcs4 = map[string]bool{"native/jit-on": true, "shm/jit-off": true}

// TestTypedAcrossProcesses: typed exchanges between endpoints of two and
// four processes (2 endpoints each, so also within a process), on every
// transport, interpreter and JIT (under the race detector the interpreter
// only), and receives whose type signature does not match the message's.
func TestTypedAcrossProcesses(t *testing.T) {
	for _, p := range withHdr {
		for _, jit := range []string{"off", "on"} {
			if testenv.Race && jit == "on" {
				continue // the race detector sees the interpreted loops, not generated code
			}
			if hdrOff(p, p == "shm"+hdrSuffix && jit == "on", false) {
				continue
			}
			np := 2
			if typedProcs4[provName(p)+"/jit-"+jit] {
				np = 4
			}
			typedAcrossProcesses(t, p, jit, np)
		}
	}
}

func typedAcrossProcesses(t *testing.T, p, jit string, np int) {
	name := fmt.Sprintf("%s/jit-%s/np%d", provName(p), jit, np)
	t.Run(name, func(t *testing.T) {
		// nodegather lowered so that gatherSend's 512-byte blocks are
		// gathered; the pipelined copy, which a blocking send to another
		// process takes first, off (TestNodeCopyTyped covers it).
		if launch(t, np, p, 90*time.Second, "WEFT_JIT="+jit, "WEFT_TUNE=nodegather=512,nodecopy=0") {
			return
		}
		if (os.Getenv("WEFT_JIT") == "off") != ddt.JITDisabled() {
			t.Fatalf("WEFT_JIT=%s but JITDisabled = %v", os.Getenv("WEFT_JIT"), ddt.JITDisabled())
		}
		w := initWorld(t)
		ctx := eptest.Ctx(t, 60*time.Second)
		eps, err := w.Comm().CreateEndpoints(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		runHandles(t, ctx, eps, func(ctx context.Context, c *endpoint.Comm) error {
			me, n := c.Rank(), c.Size()
			to, from := (me+1)%n, (me+n-1)%n
			for _, rows := range []int{3, 257, 2049, 50000} {
				if err := inTurn(me, func() error { return typedSend(ctx, c, to, rows, 5) },
					func() error { return typedRecv(ctx, c, from, rows, 5, 3) }); err != nil {
					return fmt.Errorf("rows %d: %w", rows, err)
				}
			}
			for _, rows := range []int{40, 600} { // gathered blocks
				if err := inTurn(me, func() error { return gatherSend(ctx, c, to, rows) },
					func() error { return gatherRecv(ctx, c, from, rows) }); err != nil {
					return fmt.Errorf("gather rows %d: %w", rows, err)
				}
			}
			if err := inTurn(me, func() error { return mismatchSend(ctx, c, to) },
				func() error { return mismatchRecv(ctx, c, from) }); err != nil {
				return err
			}
			return c.Barrier(ctx)
		})
	})
}

// inTurn runs send on even ranks and recv on odd ones, then the other
// way round: blocking rendezvous sends cannot wait on each other.
func inTurn(me int, send, recv func() error) error {
	for phase := 0; phase < 2; phase++ {
		f := recv
		if me%2 == phase {
			f = send
		}
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// mismatchSizes are int32 counts of mismatchSend's messages: inline in a
// ring cell or eager, staged or pipelined, rendezvous; every second
// element of a strided layout.
var mismatchSizes = []int{100, 3000, 20000}

// mismatchSend sends int32s, contiguous and strided, that mismatchRecv
// takes as float32s (a mismatch), then a message it receives rightly.
func mismatchSend(ctx context.Context, c *endpoint.Comm, to int) error {
	for _, n := range mismatchSizes {
		strided, err := committed(ddt.Vector(n, 1, 2, ddt.Int32))
		if err != nil {
			return err
		}
		if err := c.SendTyped(ctx, make([]byte, 4*n), n, ddt.Int32, to, 21); err != nil {
			return fmt.Errorf("mismatch send of %d int32s: %w", n, err)
		}
		if err := c.SendTyped(ctx, make([]byte, 8*n), 1, strided, to, 22); err != nil {
			return fmt.Errorf("mismatch send of %d strided int32s: %w", n, err)
		}
	}
	return c.SendTyped(ctx, make([]byte, 400), 100, ddt.Int32, to, 23)
}

// mismatchRecv receives mismatchSend's messages: ErrInvalid for each
// int32 message taken as float32s, then the right type works.
func mismatchRecv(ctx context.Context, c *endpoint.Comm, from int) error {
	for _, n := range mismatchSizes {
		for _, tag := range []int{21, 22} {
			if _, err := c.RecvTyped(ctx, make([]byte, 4*n), n, ddt.Float32, from, tag); !errors.Is(err, endpoint.ErrInvalid) {
				return fmt.Errorf("%d int32s (tag %d) received as float32s: %v, want ErrInvalid", n, tag, err)
			}
		}
	}
	if st, err := c.RecvTyped(ctx, make([]byte, 400), 100, ddt.Int32, from, 23); err != nil || st.Count != 400 {
		return fmt.Errorf("int32s after the mismatches: %+v %v", st, err)
	}
	return nil
}

// blockType is rows blocks of blk float64 every stride float64s.
func blockType(rows, blk, stride int) (*ddt.Type, error) {
	return committed(ddt.Vector(rows, blk, stride, ddt.Float64))
}

// gatherSend sends rows blocks of 64 float64s (512 bytes) every 100 from a
// matrix three times (tags 11-13): large enough for a rendezvous, blocks
// large enough for the node transport to gather them without packing
// (with WEFT_TUNE nodegather at 512).
func gatherSend(ctx context.Context, a *endpoint.Comm, to, rows int) error {
	src := srcMatrix(rows, 100)
	bt, err := blockType(rows, 64, 100)
	if err != nil {
		return err
	}
	for tag := 11; tag <= 13; tag++ {
		if err := a.SendTyped(ctx, src, 1, bt, to, tag); err != nil {
			return fmt.Errorf("gather send %d: %w", tag, err)
		}
	}
	return nil
}

// gatherRecv receives gatherSend's messages: contiguously, into blocks of
// another stride, and into one block fewer (truncation).
func gatherRecv(ctx context.Context, b *endpoint.Comm, from, rows int) error {
	src := srcMatrix(rows, 100)
	want := func(i int) float64 { return at(src, 100, i/64, i%64) } // i-th float of the stream
	flat := make([]byte, rows*64*8)
	st, err := b.RecvTyped(ctx, flat, rows*64, ddt.Float64, from, 11)
	if err != nil || st.Count != len(flat) {
		return fmt.Errorf("gather into contiguous: %+v %v", st, err)
	}
	for i, x := range f64s(flat) {
		if x != want(i) {
			return fmt.Errorf("gather into contiguous: float %d = %v, want %v", i, x, want(i))
		}
	}
	other, err := blockType(rows, 64, 70)
	if err != nil {
		return err
	}
	dst := make([]byte, rows*70*8)
	if _, err := b.RecvTyped(ctx, dst, 1, other, from, 12); err != nil {
		return fmt.Errorf("gather into stride 70: %w", err)
	}
	for r := 0; r < rows; r++ {
		for c := 0; c < 70; c++ {
			w := 0.0
			if c < 64 {
				w = want(r*64 + c)
			}
			if got := at(dst, 70, r, c); got != w {
				return fmt.Errorf("gather into stride 70: [%d][%d] = %v, want %v", r, c, got, w)
			}
		}
	}
	short, err := blockType(rows-1, 64, 70)
	if err != nil {
		return err
	}
	clear(dst)
	st, err = b.RecvTyped(ctx, dst, 1, short, from, 13)
	if !errors.Is(err, endpoint.ErrTruncated) || st.Count != (rows-1)*64*8 {
		return fmt.Errorf("gather into one block fewer: %+v %v", st, err)
	}
	if got := at(dst, 70, rows-2, 63); got != want((rows-1)*64-1) {
		return fmt.Errorf("gather truncated: last float %v", got)
	}
	return nil
}

// TestTypedGather: large typed messages with big blocks, between two
// endpoints of one process (the receiver unpacks straight from the
// sender's blocks) on both transports.
func TestTypedGather(t *testing.T) {
	for _, native := range []bool{true, false} {
		a, b, ctx := singletonPair(t, endpoint.WithNodeTransport(native))
		for _, rows := range []int{40, 600} { // 20 KiB, 300 KiB
			errc := make(chan error, 1)
			go func() { errc <- gatherSend(ctx, a, 1, rows) }()
			if err := gatherRecv(ctx, b, 0, rows); err != nil {
				t.Fatalf("native=%v rows %d: %v", native, rows, err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("native=%v rows %d: %v", native, rows, err)
			}
		}
	}
}

// TestParts: one message gathered from four Go slices of different types
// (positions, ids, a struct slice, a strided column), at sizes for every
// protocol, received into parts of another split of the same data and
// into plain bytes; truncation, ProcNull and bad parts.
func TestParts(t *testing.T) {
	type vel struct {
		VX, VY float32
		Flag   uint8
	}
	vt, err := ddt.Of[vel]()
	if err != nil {
		t.Fatal(err)
	}
	for _, native := range []bool{true, false} {
		a, b, ctx := singletonPair(t, endpoint.WithNodeTransport(native))
		for _, n := range []int{1, 20, 700, 9000} { // 29 B to 261 KB
			pos := make([]float64, 3*n)
			ids := make([]int32, n)
			vs := make([]vel, n)
			grid := make([]byte, 8*4*n) // column 2 of an n×4 float64 matrix
			for i := range pos {
				pos[i] = float64(i) * 1.5
			}
			for i := range ids {
				ids[i] = int32(-i)
				vs[i] = vel{float32(i), -float32(i), uint8(i)}
				binary.LittleEndian.PutUint64(grid[8*(4*i+2):], uint64(i*i))
			}
			colT, err := committed(ddt.Vector(n, 1, 4, ddt.Float64))
			if err != nil {
				t.Fatal(err)
			}
			parts := []endpoint.Part{
				{Buf: endpoint.AsBytes(pos), Count: len(pos), Type: ddt.Float64},
				{Buf: endpoint.AsBytes(ids), Count: len(ids), Type: ddt.Int32},
				{Buf: unsafeBytes(vs), Count: len(vs), Type: vt},
				{Buf: grid[16:], Count: 1, Type: colT},
			}
			total := 8*3*n + 4*n + 9*n + 8*n
			// other split: positions into two halves, the rest as bytes
			p1, p2 := make([]float64, 3*n/2), make([]float64, 3*n-3*n/2)
			rest := make([]byte, total-8*3*n+5)
			recv := []endpoint.Part{
				{Buf: endpoint.AsBytes(p1), Count: len(p1), Type: ddt.Float64},
				{Buf: endpoint.AsBytes(p2), Count: len(p2), Type: ddt.Float64},
				{Buf: rest, Count: len(rest), Type: ddt.Byte},
			}
			errc := make(chan error, 1)
			go func() { errc <- a.SendParts(ctx, parts, 1, 30) }()
			st, err := b.RecvParts(ctx, recv, 0, 30)
			if err != nil || st.Count != total {
				t.Fatalf("native=%v n=%d: %+v %v (want %d bytes)", native, n, st, err, total)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			for i := range pos {
				got := p1
				j := i
				if i >= len(p1) {
					got, j = p2, i-len(p1)
				}
				if got[j] != pos[i] {
					t.Fatalf("native=%v n=%d: position %d = %v", native, n, i, got[j])
				}
			}
			off := 0
			for i := range ids {
				if int32(binary.LittleEndian.Uint32(rest[off+4*i:])) != ids[i] {
					t.Fatalf("native=%v n=%d: id %d", native, n, i)
				}
			}
			off += 4 * n
			for i := range vs {
				b := rest[off+9*i:]
				if math.Float32frombits(binary.LittleEndian.Uint32(b)) != vs[i].VX || b[8] != vs[i].Flag {
					t.Fatalf("native=%v n=%d: struct %d packed wrong", native, n, i)
				}
			}
			off += 9 * n
			for i := 0; i < n; i++ {
				if binary.LittleEndian.Uint64(rest[off+8*i:]) != uint64(i*i) {
					t.Fatalf("native=%v n=%d: column element %d", native, n, i)
				}
			}
			// the same parts on both sides, one byte short: truncation
			short := append([]endpoint.Part(nil), recv...)
			short[2].Buf, short[2].Count = rest[:len(rest)-6], len(rest)-6
			go func() { errc <- a.SendParts(ctx, parts, 1, 31) }()
			st, err = b.RecvParts(ctx, short, 0, 31)
			if !errors.Is(err, endpoint.ErrTruncated) || st.Count != total-1 {
				t.Fatalf("native=%v n=%d: truncated parts: %+v %v", native, n, st, err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}
		if r, err := a.IsendParts([]endpoint.Part{{Buf: make([]byte, 8), Count: 1, Type: ddt.Float64}}, endpoint.ProcNull, 1); err != nil || !r.Done() {
			t.Fatalf("parts to ProcNull: %v", err)
		}
		if _, err := a.IsendParts(nil, 1, 1); !errors.Is(err, endpoint.ErrInvalid) {
			t.Fatalf("no parts: %v", err)
		}
		bad := []endpoint.Part{{Buf: make([]byte, 8), Count: 1, Type: ddt.Float64}, {Buf: make([]byte, 8), Count: 2, Type: ddt.Float64}}
		if _, err := a.IsendParts(bad, 1, 1); !errors.Is(err, ddt.ErrBounds) {
			t.Fatalf("part past its slice: %v", err)
		}
		if _, err := b.IrecvParts(bad, 0, 1); !errors.Is(err, ddt.ErrBounds) {
			t.Fatalf("receive part past its slice: %v", err)
		}
	}
}

func unsafeBytes[T any](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}
