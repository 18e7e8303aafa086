package onesided

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/internal/nodeseg"
	"github.com/weft-hpc/weft/internal/testenv"
)

func TestDynamic(t *testing.T) {
	kinds := []windowKind{netKind("shm", false), netKind("tcp;ofi_rxm", false),
		// PutSignalRegion's other signaller (the others' auto ordering
		// is CQ data, which a dynamic window turns into write-after-write
		// ordered writes): a signal once the data's delivery completed
		{"shm-delivery", "shm", false, providerCase{"shm", OrderDelivery}.opts()},
		{"tcp-delivery", "tcp;ofi_rxm", false, providerCase{"tcp;ofi_rxm", OrderDelivery}.opts()}}
	runKinds(t, 3, kinds, func(ctx context.Context, g Group, k windowKind) error {
		return dynamicScenario(ctx, g, false, nil, k.opts...)
	})
}

// TestDynamicShared runs the scenario on AttachShared memory: by direct
// stores between the goroutine ranks of this process (shared memory on,
// the default), and through each provider with shared memory off.
func TestDynamicShared(t *testing.T) {
	kinds := []windowKind{{"direct", "shm", false, []Option{WithProvider("shm")}},
		netKind("shm", false), netKind("tcp;ofi_rxm", false)}
	runKinds(t, 3, kinds, func(ctx context.Context, g Group, k windowKind) error {
		direct := func(int) bool { return k.name == "direct" }
		return dynamicScenario(ctx, g, true, direct, k.opts...)
	})
}

// dynamicScenario: each rank attaches two buffers of its own sizes (Go
// memory, or with shared AttachShared's) and hands the Regions round
// (Allgather of MarshalBinary); then every rank puts into, gets from and
// updates atomically both Regions of its right neighbour and of itself,
// and checks its own buffers after a Fence; one Region is detached and
// another attached in its place and used; then the errors. direct(q)
// says whether this rank should reach rank q's shared Regions by direct
// stores (nil: never).
func dynamicScenario(ctx context.Context, g Group, shared bool, direct func(q int) bool, opts ...Option) (err error) {
	me, n := g.Rank(), g.Size()
	right, left := (me+1)%n, (me+n-1)%n
	w, err := CreateDynamic(ctx, g, opts...)
	if err != nil {
		return err
	}
	defer cleanup(ctx, &err, w.Free)
	attach := func(size int) (Region, []byte, error) {
		if shared {
			return w.AttachShared(size)
		}
		b := make([]byte, size)
		r, err := w.Attach(b)
		return r, b, err
	}
	var bufs [][]byte
	var mine []Region
	for _, size := range []int{4096 + 64*me, 70000} {
		r, b, err := attach(size)
		if err != nil {
			return err
		}
		mine, bufs = append(mine, r), append(bufs, b)
	}
	exchange := func(rs []Region) ([][]Region, error) {
		var wire []byte
		for _, r := range rs {
			b, _ := r.MarshalBinary()
			wire = append(wire, b...)
		}
		all, err := g.Allgather(ctx, wire)
		if err != nil {
			return nil, err
		}
		out := make([][]Region, n)
		for q, b := range all {
			for len(b) > 0 {
				var r Region
				k := RegionWireLen(b)
				if k == 0 {
					return nil, fmt.Errorf("rank %d's Regions end in %d bytes of no Region", q, len(b))
				}
				if err := r.UnmarshalBinary(b[:k]); err != nil {
					return nil, err
				}
				out[q], b = append(out[q], r), b[k:]
			}
		}
		return out, nil
	}
	regions, err := exchange(mine)
	if err != nil {
		return err
	}
	for q := range n {
		want := shared && direct != nil && direct(q)
		for _, r := range regions[q] {
			if w.DirectRegion(r) != want {
				return fmt.Errorf("DirectRegion(rank %d's Region) = %v, want %v", q, !want, want)
			}
		}
	}
	if regions[right][0].Rank != right || regions[right][0].Len != 4096+64*right {
		return fmt.Errorf("rank %d's Region as received: %+v", right, regions[right][0])
	}
	pattern := func(rank, k, i int) byte { return byte(rank*53 + k*17 + i*3 + 1) }
	for k, r := range regions[right] {
		data := make([]byte, r.Len-64)
		for i := range data {
			data[i] = pattern(me, k, i)
		}
		if err := w.PutRegion(r, 64, data); err != nil {
			return err
		}
		// A counter in the Region's first word: every rank adds to its
		// right neighbour's and to its own.
		var one [8]byte
		binary.LittleEndian.PutUint64(one[:], uint64(me+1))
		if err := w.AccumulateRegion(r, 0, AtomicUint64, OpSum, one[:]); err != nil {
			return err
		}
		if err := w.AccumulateRegion(regions[me][k], 0, AtomicUint64, OpSum, one[:]); err != nil {
			return err
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	for k, b := range bufs {
		for i, v := range b[64:] {
			if v != pattern(left, k, i) {
				return fmt.Errorf("Region %d: byte %d is %d after rank %d's PutRegion, want %d", k, 64+i, v, left, pattern(left, k, i))
			}
		}
		if got, want := binary.LittleEndian.Uint64(b), uint64(me+1+left+1); got != want {
			return fmt.Errorf("Region %d: counter %d, want %d", k, got, want)
		}
	}
	// Gets and fetching atomics of the right neighbour's Regions.
	for k, r := range regions[right] {
		got := make([]byte, r.Len-64)
		if err := w.GetRegion(r, 64, got); err != nil {
			return err
		}
		if err := w.Flush(ctx, right); err != nil {
			return err
		}
		for i, v := range got {
			if v != pattern(me, k, i) {
				return fmt.Errorf("GetRegion of rank %d's Region %d: byte %d is %d", right, k, i, v)
			}
		}
		old, err := w.FetchAndOpRegion(r, 8, AtomicUint64, OpSum, 5)
		if err != nil {
			return err
		}
		if old != 0 { // word 1 is written by nothing else
			return fmt.Errorf("FetchAndOpRegion of rank %d's Region %d read %d, want 0", right, k, old)
		}
		prev, err := w.CompareAndSwapRegion(r, 8, AtomicUint64, old+5, 77)
		if err != nil {
			return err
		}
		if prev != old+5 {
			return fmt.Errorf("CompareAndSwapRegion found %d, want %d", prev, old+5)
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	for k, b := range bufs {
		if v := binary.LittleEndian.Uint64(b[8:]); v != 77 {
			return fmt.Errorf("Region %d: word 1 is %d after the compare-and-swap, want 77", k, v)
		}
	}
	// Request forms: into the right neighbour's Regions, bytes 16..48 by
	// RputRegion, a counter at 48 by RaccumulateRegion, the data at 64 read
	// back by RgetRegion; each checked once its request completes.
	var reqs []*Request
	for k, r := range regions[right] {
		put := make([]byte, 32)
		for i := range put {
			put[i] = pattern(me, k+7, i)
		}
		q, err := w.RputRegion(r, 16, put)
		if err != nil {
			return err
		}
		var add [8]byte
		binary.LittleEndian.PutUint64(add[:], uint64(me+1))
		qa, err := w.RaccumulateRegion(r, 48, AtomicUint64, OpSum, add[:])
		if err != nil {
			return err
		}
		got := make([]byte, r.Len-64)
		qg, err := w.RgetRegion(r, 64, got)
		if err != nil {
			return err
		}
		if err := qg.Wait(ctx); err != nil {
			return err
		}
		for i, v := range got {
			if v != pattern(me, k, i) {
				return fmt.Errorf("RgetRegion of rank %d's Region %d: byte %d is %d", right, k, i, v)
			}
		}
		reqs = append(reqs, q, qa)
	}
	if err := WaitAll(ctx, reqs...); err != nil {
		return err
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	for k, b := range bufs {
		for i, v := range b[16:48] {
			if v != pattern(left, k+7, i) {
				return fmt.Errorf("Region %d: byte %d is %d after rank %d's RputRegion", k, 16+i, v, left)
			}
		}
		if v := binary.LittleEndian.Uint64(b[48:]); v != uint64(left+1) {
			return fmt.Errorf("Region %d: RaccumulateRegion's counter is %d, want %d", k, v, left+1)
		}
	}
	// Flag-polled puts: into the right neighbour's Region 1, data of 3000
	// bytes (a tracked write) signalled in a Region of signal words, 16
	// bytes (injected) likewise, a signal alone, and data signalled in
	// its own Region; each rank waits on its own words and then finds
	// the left neighbour's data.
	sigMine, _, err := attach(64)
	if err != nil {
		return err
	}
	sigs, err := exchange([]Region{sigMine})
	if err != nil {
		return err
	}
	d1, sr := regions[right][1], sigs[right][0]
	// A direct store issues no libfabric operation (bytes 40..48 of the
	// signal Regions are not used otherwise; between processes the
	// libfabric path would issue one).
	before := w.net.issued()
	if err := w.PutRegion(sr, 40, make([]byte, 8)); err != nil {
		return err
	}
	if shared && direct != nil && direct(right) && w.net.issued() != before {
		return fmt.Errorf("a PutRegion by direct stores issued %d libfabric operations", w.net.issued()-before)
	}
	big, small, own := make([]byte, 3000), make([]byte, 16), make([]byte, 8)
	for i := range big {
		big[i] = pattern(me, 11, i)
	}
	for i := range small {
		small[i] = pattern(me, 12, i)
	}
	for i := range own {
		own[i] = pattern(me, 13, i)
	}
	for _, step := range []error{
		w.PutSignalRegion(d1, 1024, big, sr, 0, 1),
		w.PutSignalRegion(d1, 8192, small, sr, 8, 7),
		w.SignalRegion(sr, 16, 42),
		w.PutSignalRegion(d1, 9000, own, d1, 9016, 5),
	} {
		if step != nil {
			return step
		}
	}
	for _, c := range []struct {
		r        Region
		off      int
		cmp      Cmp
		val      uint64
		at, n, k int // the data the signal covers: bufs[1][at:at+n], pattern k
	}{{sigMine, 0, CmpGE, 1, 1024, 3000, 11}, {sigMine, 8, CmpEQ, 7, 8192, 16, 12}, {sigMine, 16, CmpEQ, 42, 0, 0, 0}, {mine[1], 9016, CmpEQ, 5, 9000, 8, 13}} {
		v, err := w.WaitSignalRegion(ctx, c.r, c.off, c.cmp, c.val)
		if err != nil {
			return err
		}
		if !c.cmp.test(v, c.val) {
			return fmt.Errorf("WaitSignalRegion(%d) returned %d", c.off, v)
		}
		for i, b := range bufs[1][c.at : c.at+c.n] {
			if b != pattern(left, c.k, i) {
				return fmt.Errorf("signal at %d seen, but byte %d of its data is %d, want %d", c.off, c.at+i, b, pattern(left, c.k, i))
			}
		}
		if ok, v, err := w.TestSignalRegion(c.r, c.off, c.cmp, c.val); !ok || err != nil {
			return fmt.Errorf("TestSignalRegion(%d) after the wait: %v %d %v", c.off, ok, v, err)
		}
	}
	if ok, _, err := w.TestSignalRegion(sigMine, 24, CmpEQ, 1); ok || err != nil {
		return fmt.Errorf("TestSignalRegion of a word nobody signalled: %v %v", ok, err)
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	for name, c := range map[string]struct {
		err  error
		want error
	}{
		"signal misaligned":    {w.PutSignalRegion(d1, 0, nil, sr, 4, 1), ErrInvalid},
		"signal past the end":  {w.SignalRegion(sr, 64, 1), ErrOutOfRange},
		"signal over the data": {w.PutSignalRegion(d1, 9000, own, d1, 9000, 1), ErrInvalid},
		"wait misaligned":      {func() error { _, _, err := w.TestSignalRegion(sigMine, 12, CmpEQ, 0); return err }(), ErrInvalid},
		"wait past the end":    {func() error { _, err := w.WaitSignalRegion(ctx, sigMine, 60, CmpEQ, 0); return err }(), ErrOutOfRange},
		"bad comparison":       {func() error { _, _, err := w.TestSignalRegion(sigMine, 0, Cmp(99), 0); return err }(), ErrInvalid},
	} {
		if !errors.Is(c.err, c.want) {
			return fmt.Errorf("%s: %v, want %v", name, c.err, c.want)
		}
	}
	if n > 1 {
		if err := w.PutSignalRegion(d1, 0, nil, sigs[left][0], 0, 1); !errors.Is(err, ErrInvalid) && right != left {
			return fmt.Errorf("data and signal in Regions of two ranks: %v", err)
		}
		if _, _, err := w.TestSignalRegion(sr, 0, CmpEQ, 0); !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("TestSignalRegion of another rank's Region: %v", err)
		}
	}
	// Typed transfers into and out of the right neighbour's Region 1: a
	// column of a 16x16 float64 matrix at 16384 from 16 contiguous
	// float64 (iovec writes), and every other float64 of 66 into blocks
	// of 3 every 8 at 24576 (both sides non-contiguous: chunks);
	// read back with GetTypedRegion; the neighbour checks its bytes.
	col, err := ddt.Vector(16, 1, 16, ddt.Float64)
	if err == nil {
		err = col.Commit()
	}
	if err != nil {
		return err
	}
	every2, err := ddt.Vector(33, 1, 2, ddt.Float64) // 33 of 66 float64
	if err == nil {
		err = every2.Commit()
	}
	if err != nil {
		return err
	}
	threeOf8, err := ddt.Vector(11, 3, 8, ddt.Float64) // 33 float64 in blocks of 3 every 8
	if err == nil {
		err = threeOf8.Commit()
	}
	if err != nil {
		return err
	}
	colData, nc := make([]byte, 16*8), make([]byte, 66*8)
	for i := range colData {
		colData[i] = pattern(me, 21, i)
	}
	for i := range nc {
		nc[i] = pattern(me, 22, i)
	}
	if err := w.PutTypedRegion(d1, 16384, colData, 16, ddt.Float64, 1, col); err != nil {
		return err
	}
	if err := w.PutTypedRegion(d1, 24576, nc, 1, every2, 1, threeOf8); err != nil {
		return err
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	for i := range 16 {
		for b := range 8 {
			if got, want := bufs[1][16384+i*16*8+b], pattern(left, 21, i*8+b); got != want {
				return fmt.Errorf("PutTypedRegion's column: element %d byte %d is %d, want %d", i, b, got, want)
			}
		}
	}
	for e := range 33 { // element e of the stream: origin float64 2e, target slot 8(e/3)+e%3
		src, dst := 2*e*8, 24576+(8*(e/3)+e%3)*8
		for b := range 8 {
			if got, want := bufs[1][dst+b], pattern(left, 22, src+b); got != want {
				return fmt.Errorf("PutTypedRegion's blocks: element %d byte %d is %d, want %d", e, b, got, want)
			}
		}
	}
	// Origin blocks of 64 KiB (vectored writes and reads of the
	// origin's own memory) into a contiguous 128 KiB of a Region each
	// rank attaches for it.
	bigMine, bigBuf, err := attach(128 << 10)
	if err != nil {
		return err
	}
	bigs, err := exchange([]Region{bigMine})
	if err != nil {
		return err
	}
	halves, err := ddt.Vector(2, 8192, 16384, ddt.Float64) // two 64 KiB blocks 128 KiB apart
	if err == nil {
		err = halves.Commit()
	}
	if err != nil {
		return err
	}
	spread := make([]byte, 192<<10)
	for i := range spread {
		spread[i] = pattern(me, 23, i)
	}
	if err := w.PutTypedRegion(bigs[right][0], 0, spread, 1, halves, 128<<10, ddt.Byte); err != nil {
		return err
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	for i, b := range bigBuf {
		src := i
		if i >= 64<<10 {
			src = i + 64<<10
		}
		if b != pattern(left, 23, src) {
			return fmt.Errorf("PutTypedRegion of 64 KiB blocks: byte %d is %d, want %d", i, b, pattern(left, 23, src))
		}
	}
	spreadBack := make([]byte, 192<<10)
	if err := w.GetTypedRegion(ctx, bigs[right][0], 0, spreadBack, 1, halves, 128<<10, ddt.Byte); err != nil {
		return err
	}
	if string(spreadBack[:64<<10]) != string(spread[:64<<10]) || string(spreadBack[128<<10:]) != string(spread[128<<10:]) {
		return fmt.Errorf("GetTypedRegion of 64 KiB blocks read other bytes")
	}
	back := make([]byte, 16*8)
	if err := w.GetTypedRegion(ctx, d1, 16384, back, 16, ddt.Float64, 1, col); err != nil {
		return err
	}
	if string(back) != string(colData) {
		return fmt.Errorf("GetTypedRegion read back another column")
	}
	// AccumulateTypedRegion: every rank adds its rank+1 to 20 uint64
	// counters laid out every 4th word at 40960 of the right neighbour's
	// Region 1, from a contiguous origin, and to its own the same way.
	every4, err := ddt.Vector(20, 1, 4, ddt.Uint64)
	if err == nil {
		err = every4.Commit()
	}
	if err != nil {
		return err
	}
	clear(bufs[1][40960 : 40960+20*32]) // PutRegion wrote there: the counters start at 0
	if err := w.Fence(ctx); err != nil {
		return err
	}
	adds := make([]byte, 20*8)
	for i := range 20 {
		binary.LittleEndian.PutUint64(adds[i*8:], uint64(me+1)*uint64(i+1))
	}
	for _, r := range []Region{d1, mine[1]} {
		if err := w.AccumulateTypedRegion(r, 40960, AtomicUint64, OpSum, adds, 20, ddt.Uint64, 1, every4); err != nil {
			return err
		}
	}
	if err := w.AccumulateTypedRegion(d1, 40964, AtomicUint64, OpSum, adds, 20, ddt.Uint64, 1, every4); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("AccumulateTypedRegion at a misaligned offset: %v", err)
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	for i := range 20 {
		if got, want := binary.LittleEndian.Uint64(bufs[1][40960+i*32:]), uint64(me+1+left+1)*uint64(i+1); got != want {
			return fmt.Errorf("AccumulateTypedRegion's counter %d is %d, want %d", i, got, want)
		}
	}
	// A rank's memory is read only while it drives progress (shm between
	// processes): no rank leaves for the Allgathers below before every
	// read of it has completed.
	if err := w.Fence(ctx); err != nil {
		return err
	}
	for name, c := range map[string]struct {
		err  error
		want error
	}{
		"typed past the end": {w.PutTypedRegion(d1, d1.Len-100, colData, 16, ddt.Float64, 1, col), ErrOutOfRange},
		"typed sizes differ": {w.PutTypedRegion(d1, 0, colData, 15, ddt.Float64, 1, col), ErrInvalid},
		"typed nil type":     {w.GetTypedRegion(ctx, d1, 0, back, 16, nil, 1, col), ErrInvalid},
	} {
		if !errors.Is(c.err, c.want) {
			return fmt.Errorf("%s: %v, want %v", name, c.err, c.want)
		}
	}
	// Contention: every rank adds to two counters of rank 0's Region, by
	// fetch-and-add, accumulate and compare-and-swap loops; the sums
	// must be exact (on shared memory spanning nodes, only if every rank
	// uses libfabric's atomics for it).
	ctrMine, ctrBuf, err := attach(64)
	if err != nil {
		return err
	}
	ctrs, err := exchange([]Region{ctrMine})
	if err != nil {
		return err
	}
	const rounds = 60
	var two [8]byte
	binary.LittleEndian.PutUint64(two[:], 2)
	if shared && direct != nil && direct(0) {
		// CPU atomics only where every rank is on the Region's node.
		oneNode := true
		for q := range n {
			oneNode = oneNode && direct(q)
		}
		before := w.net.issued()
		if _, err := w.FetchAndOpRegion(ctrs[0][0], 16, AtomicUint64, OpSum, 1); err != nil {
			return err
		}
		if issued := w.net.issued() != before; issued == oneNode {
			return fmt.Errorf("a FetchAndOpRegion on shared memory of this node, every rank on one node %v: libfabric operations issued %v", oneNode, issued)
		}
	}
	for range rounds {
		if _, err := w.FetchAndOpRegion(ctrs[0][0], 0, AtomicUint64, OpSum, 1); err != nil {
			return err
		}
		if err := w.AccumulateRegion(ctrs[0][0], 0, AtomicUint64, OpSum, two[:]); err != nil {
			return err
		}
		for v := uint64(0); ; {
			prev, err := w.CompareAndSwapRegion(ctrs[0][0], 8, AtomicUint64, v, v+1)
			if err != nil {
				return err
			}
			if prev == v {
				break
			}
			v = prev
		}
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if me == 0 {
		if a, b := binary.LittleEndian.Uint64(ctrBuf), binary.LittleEndian.Uint64(ctrBuf[8:]); a != 3*rounds*uint64(n) || b != rounds*uint64(n) {
			return fmt.Errorf("counters after %d ranks' %d rounds: %d and %d, want %d and %d", n, rounds, a, b, 3*rounds*n, rounds*n)
		}
	}
	// Detach the first Region, attach a new buffer, hand it round, use it.
	if err := w.Detach(mine[0]); err != nil {
		return err
	}
	if err := w.Detach(mine[0]); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("a second Detach: %v", err)
	}
	fresh := make([]byte, 1000)
	r, err := w.Attach(fresh)
	if err != nil {
		return err
	}
	if _, err := w.Attach(fresh); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("attaching a buffer twice: %v", err)
	}
	if regions, err = exchange([]Region{r}); err != nil {
		return err
	}
	if err := w.PutRegion(regions[right][0], 0, []byte("fresh memory")); err != nil {
		return err
	}
	if err := w.Fence(ctx); err != nil {
		return err
	}
	if string(fresh[:12]) != "fresh memory" {
		return fmt.Errorf("the new Region holds %q", fresh[:12])
	}
	// Errors.
	rr := regions[right][0]
	for name, c := range map[string]struct {
		err  error
		want error
	}{
		"put past the end":  {w.PutRegion(rr, rr.Len-4, make([]byte, 8)), ErrOutOfRange},
		"negative offset":   {w.GetRegion(rr, -1, make([]byte, 1)), ErrOutOfRange},
		"rank outside":      {w.PutRegion(Region{Rank: n, Len: 8}, 0, nil), ErrUnknownRank},
		"misaligned atomic": {w.AccumulateRegion(rr, 4, AtomicUint64, OpSum, make([]byte, 8)), ErrInvalid},
		"empty attach":      {func() error { _, err := w.Attach(nil); return err }(), ErrInvalid},
		"misaligned attach": {func() error { _, err := w.Attach(make([]byte, 16)[1:9]); return err }(), ErrInvalid},
		"detach another's":  {w.Detach(regions[right][0]), ErrInvalid},
		"short wire":        {new(Region).UnmarshalBinary(make([]byte, 31)), ErrInvalid},
		"noop accumulate":   {w.AccumulateRegion(rr, 0, AtomicUint64, OpNoOp, make([]byte, 8)), ErrInvalid},
		// This rank's own Regions are checked (libfabric's shm provider
		// drops an operation with a key nothing registered: it would
		// never complete): one detached, one made up.
		"own detached":  {w.GetRegion(mine[0], 0, make([]byte, 1)), ErrInvalid},
		"own made up":   {w.PutRegion(Region{Rank: me, Addr: 3, Key: 1 << 40, Len: 8}, 0, make([]byte, 1)), ErrInvalid},
		"own other len": {w.GetRegion(Region{Rank: me, Addr: r.Addr, Key: r.Key, Len: r.Len + 8}, 0, make([]byte, 1)), ErrInvalid},
	} {
		if n > 1 || name != "detach another's" { // alone, the right neighbour is this rank
			if !errors.Is(c.err, c.want) {
				return fmt.Errorf("%s: %v, want %v", name, c.err, c.want)
			}
		}
	}
	// Region operations belong to dynamic windows.
	plain, err := Create(ctx, g, make([]byte, 8), opts...)
	if err != nil {
		return err
	}
	if _, err := plain.Attach(make([]byte, 8)); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("Attach on a Create window: %v", err)
	}
	if err := plain.PutRegion(rr, 0, nil); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("PutRegion on a Create window: %v", err)
	}
	if err := plain.PutTypedRegion(rr, 0, nil, 0, ddt.Byte, 0, ddt.Byte); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("PutTypedRegion on a Create window: %v", err)
	}
	if err := plain.SignalRegion(rr, 0, 1); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("SignalRegion on a Create window: %v", err)
	}
	if _, err := plain.WaitSignalRegion(ctx, rr, 0, CmpEQ, 1); !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("WaitSignalRegion on a Create window: %v", err)
	}
	if err := plain.Free(ctx); err != nil {
		return err
	}
	if _, err := CreateDynamic(ctx, g, WithSharedMemory(ShmOnly)); !errors.Is(err, ErrNotSupported) {
		return fmt.Errorf("CreateDynamic with direct stores forced: %v", err)
	}
	return nil
}

// TestDynamicSharedMemory: AttachShared's segment files exist while
// attached and go at Detach and Free; a Region detached before a rank
// mapped it gives that rank ErrInvalid; the encodings of several Regions
// split with RegionWireLen and bad ones are refused; one rank with
// shared memory off turns direct stores off for every rank.
func TestDynamicSharedMemory(t *testing.T) {
	requireProvider(t, "shm")
	mine := fmt.Sprintf("weft-dyn-%d-", os.Getpid())
	leftovers := func() []string {
		var out []string
		ents, _ := os.ReadDir(nodeseg.Dir())
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), mine) {
				out = append(out, e.Name())
			}
		}
		return out
	}
	runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
		w, err := CreateDynamic(ctx, g, WithProvider("shm"))
		if err != nil {
			return err
		}
		defer cleanup(ctx, &err, w.Free)
		var wire []byte
		var kept, gone Region
		if g.Rank() == 0 {
			var buf []byte
			if kept, buf, err = w.AttachShared(100); err != nil {
				return err
			}
			copy(buf, "shared bytes")
			if gone, _, err = w.AttachShared(5000); err != nil {
				return err
			}
			for _, r := range []Region{kept, gone} {
				if _, err := os.Stat(filepath.Join(nodeseg.Dir(), r.seg)); err != nil {
					return fmt.Errorf("an attached Region's file: %v", err)
				}
				b, _ := r.MarshalBinary()
				wire = append(wire, b...)
			}
			if err := w.Detach(gone); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(nodeseg.Dir(), gone.seg)); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("a detached Region's file: %v", err)
			}
		}
		all, err := g.Allgather(ctx, wire)
		if err != nil {
			return err
		}
		if g.Rank() == 1 {
			b := all[0]
			k := RegionWireLen(b)
			if k <= regionWire || k >= len(b) || RegionWireLen(b[:k-1]) != 0 {
				return fmt.Errorf("RegionWireLen of %d bytes of two shared Regions: %d", len(b), k)
			}
			if err := kept.UnmarshalBinary(b[:k]); err != nil {
				return err
			}
			if err := gone.UnmarshalBinary(b[k:]); err != nil {
				return err
			}
			if !w.DirectRegion(kept) {
				return fmt.Errorf("a shared Region of this node is not direct")
			}
			got := make([]byte, 12)
			if err := w.GetRegion(kept, 0, got); err != nil || string(got) != "shared bytes" {
				return fmt.Errorf("GetRegion of the kept Region: %q, %v", got, err)
			}
			if err := w.PutRegion(gone, 0, got); !errors.Is(err, ErrInvalid) {
				return fmt.Errorf("PutRegion into a Region detached before it was mapped: %v", err)
			}
			bad := append([]byte(nil), b[:k]...)
			copy(bad[regionWire+2:], "xeft")
			for name, enc := range map[string][]byte{"truncated": b[:k-1], "trailing byte": b[:k+1], "foreign segment name": bad} {
				if err := new(Region).UnmarshalBinary(enc); !errors.Is(err, ErrInvalid) {
					return fmt.Errorf("%s: %v", name, err)
				}
			}
		}
		return g.Barrier(ctx)
	})
	if left := leftovers(); len(left) > 0 {
		t.Errorf("segment files left after Free: %v", left)
	}
	// One rank turns shared memory off: no rank stores directly, and
	// AttachShared memory is reached through libfabric.
	runRanks(t, 2, func(ctx context.Context, g Group) (err error) {
		opts := []Option{WithProvider("shm")}
		if g.Rank() == 1 {
			opts = append(opts, WithSharedMemory(ShmOff))
		}
		w, err := CreateDynamic(ctx, g, opts...)
		if err != nil {
			return err
		}
		defer cleanup(ctx, &err, w.Free)
		r, buf, err := w.AttachShared(64)
		if err != nil {
			return err
		}
		b, _ := r.MarshalBinary()
		all, err := g.Allgather(ctx, b)
		if err != nil {
			return err
		}
		var peer Region
		if err := peer.UnmarshalBinary(all[1-g.Rank()]); err != nil {
			return err
		}
		if w.DirectRegion(peer) || w.DirectRegion(r) || len(b) != regionWire {
			return fmt.Errorf("direct stores with shared memory off on a rank (encoding of %d bytes)", len(b))
		}
		if err := w.PutRegion(peer, 8, []byte{byte(g.Rank() + 1)}); err != nil {
			return err
		}
		if err := w.Fence(ctx); err != nil {
			return err
		}
		if buf[8] != byte(2-g.Rank()) {
			return fmt.Errorf("byte 8 is %d after the other rank's PutRegion", buf[8])
		}
		return nil
	})
	if left := leftovers(); len(left) > 0 {
		t.Errorf("segment files left: %v", left)
	}
}

// FuzzRegion: a Region encoding that decodes re-encodes to the same
// bytes and is exactly RegionWireLen long; any other input gives
// ErrInvalid, and RegionWireLen never claims more bytes than it has. A
// shared Region built from the fuzzer's values decodes to itself, also
// when another encoding follows it. The seeds run as ordinary tests.
func FuzzRegion(f *testing.F) {
	plain, _ := Region{Rank: 3, Addr: 0x7f00, Key: 9, Len: 4096}.MarshalBinary()
	shared, _ := Region{Rank: 1, Addr: 1, Key: 2, Len: 64, seg: "weft-dyn-1-2-ab", node: "host/boot"}.MarshalBinary()
	f.Add(plain, 0, uint64(0), 1, "weft-dyn-5-6-cd", "n")
	f.Add(shared, 7, uint64(1<<40), 1<<40, "weft-dyn-", "host/boot")
	f.Add(shared[:len(shared)-1], 0, uint64(0), 0, "x", "")
	f.Fuzz(func(t *testing.T, b []byte, rank int, addr uint64, n int, seg, node string) {
		if k := RegionWireLen(b); k > len(b) || k < 0 {
			t.Fatalf("RegionWireLen of %d bytes: %d", len(b), k)
		}
		var d Region
		if err := d.UnmarshalBinary(b); err == nil {
			again, _ := d.MarshalBinary()
			if !bytes.Equal(again, b) {
				t.Fatalf("re-encoded %x, decoded from %x", again, b)
			}
			if RegionWireLen(b) != len(b) {
				t.Fatalf("a %d-byte encoding that decodes, RegionWireLen %d", len(b), RegionWireLen(b))
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatalf("UnmarshalBinary error does not wrap ErrInvalid: %v", err)
		}
		if rank < 0 || rank > 1<<31 || n < 0 || n > dynMask || len(seg) > 200 || len(node) > 200 {
			return
		}
		in := Region{Rank: rank, Addr: addr, Key: ^addr, Len: n, seg: "weft-dyn-" + strings.ReplaceAll(seg, "/", ""), node: node + "n"}
		enc, _ := in.MarshalBinary()
		two := append(enc, plain...)
		k := RegionWireLen(two)
		var out Region
		if err := out.UnmarshalBinary(two[:k]); err != nil || out != in {
			t.Fatalf("%+v encodes to %x, decodes to %+v, %v", in, enc, out, err)
		}
	})
}

// TestCallContextEndsPathWaits: a blocking call's context ends the
// network path's own waits too (room in the provider's queue, a control
// operation's completion), not only the window's timeout. A Get from
// another rank's Region whose key nothing registered is dropped by
// libfabric's shm provider and never completes, and the rank's later
// operations queue behind it; LockAll with a 100 ms context then fails
// with the context's error, where it used to wait out WithTimeout (here
// 5 s) with ErrTimeout.
func TestCallContextEndsPathWaits(t *testing.T) {
	runRanks(t, 2, func(ctx context.Context, g Group) error {
		w, err := CreateDynamic(ctx, g, WithTimeout(5*time.Second), WithSharedMemory(ShmOff))
		if err != nil {
			return err
		}
		defer func() { // rank 0's Free ends with its context: its Get never completes
			fctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			w.Free(fctx)
		}()
		if g.Rank() != 0 {
			return nil
		}
		forged := Region{Rank: 1, Addr: 8, Key: 1 << 40, Len: 64}
		if _, err := w.RgetRegion(forged, 0, make([]byte, 8)); err != nil {
			return err
		}
		fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err = w.FlushAll(fctx)
		cancel()
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			testenv.Skip(t, "provider:shm", "the provider ended the forged Get (%v): nothing wedges", err)
		}
		lctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if err := w.LockAll(lctx); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("LockAll behind a wedged operation: %v, want the context's deadline", err)
		}
		return nil
	})
}
