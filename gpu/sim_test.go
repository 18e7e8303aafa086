package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/internal/ptxsim"
)

// simBackend runs the emitted PTX in internal/ptxsim: every allocation is
// a mapped region 4 KiB away from the next, so any stray access faults.
type simBackend struct {
	mem    ptxsim.Memory
	next   uint64
	builds int
	stats  ptxsim.Stats
}

type simFn struct {
	m    *ptxsim.Module
	name string
}

func newSimDevice() *Device {
	d := newDevice(&simBackend{next: 1 << 32})
	d.block, d.maxGrid = 32, 3 // small, so that the grid-stride loop runs
	return d
}

func (s *simBackend) kind() string     { return "ptxsim" }
func (s *simBackend) describe() string { return "PTX simulator" }
func (s *simBackend) integrated() bool { return true }
func (s *simBackend) language() lang   { return langPTX }
func (s *simBackend) alloc(n int64, host bool) (mem, error) {
	if n > 1<<30 { // as a device runs out of memory
		return mem{}, fmt.Errorf("ptxsim: alloc of %d bytes: out of memory", n)
	}
	data := make([]byte, n)
	m := mem{h: data, addr: s.next}
	if host {
		m.host = data
	}
	s.mem.Map(s.next, data)
	s.next += (uint64(n)+255)/256*256 + 4096
	return m, nil
}
func (s *simBackend) free(mem) error { return nil }
func (s *simBackend) write(m mem, off int64, p []byte) error {
	copy(m.h.([]byte)[off:], p)
	return nil
}
func (s *simBackend) read(m mem, off int64, p []byte) error {
	copy(p, m.h.([]byte)[off:])
	return nil
}
func (s *simBackend) build(src string, names []string) ([]any, error) {
	mod, err := ptxsim.Parse(src)
	if err != nil {
		return nil, err
	}
	s.builds++
	out := make([]any, len(names))
	for i, n := range names {
		if _, ok := mod.Kernels[n]; !ok {
			return nil, errors.New("no kernel " + n)
		}
		out[i] = simFn{mod, n}
	}
	return out, nil
}
func (s *simBackend) launch(f any, a launchArgs) error {
	fn := f.(simFn)
	st, err := fn.m.Run(fn.name, []uint64{a.typed.addr + uint64(a.toff), a.packed.addr + uint64(a.poff), a.tab.addr, a.q0, a.n}, a.grid, a.block, &s.mem)
	s.stats.Instructions += st.Instructions
	s.stats.Threads += st.Threads
	return err
}
func (s *simBackend) close() error { return nil }

// deviceCheck packs and unpacks count elements of ty on d, whole and in a
// random window, with guard bytes around the typed data and the packed
// window, and compares every byte with ddttest's reference.
func deviceCheck(t *testing.T, d *Device, ty *ddt.Type, count int, r *rand.Rand) {
	t.Helper()
	const g = 64
	ctx := context.Background()
	n, base := ddttest.Layout(ty, count)
	shift := int64(r.IntN(4)) * 8 // vary the origin's alignment
	host := make([]byte, int64(n)+2*g+shift)
	for i := range host {
		host[i] = byte(r.Uint32())
	}
	typedBuf, err := d.Alloc(int64(len(host)))
	if err != nil {
		t.Fatal(err)
	}
	defer typedBuf.Free()
	if err := typedBuf.Write(0, host); err != nil {
		t.Fatal(err)
	}
	src := Typed{Type: ty, Buf: typedBuf, Base: base + g + shift, Count: count}
	want := ddttest.Pack(ty, host[g+shift:g+shift+int64(n)], base, count)
	total := int64(len(want))
	windows := [][2]int64{{0, total}}
	if total > 0 {
		from := r.Int64N(total)
		if r.IntN(2) == 0 {
			from &^= 7
		}
		windows = append(windows, [2]int64{from, 1 + r.Int64N(total-from)})
	}
	pk, err := d.Alloc(total + 2*g)
	if err != nil {
		t.Fatal(err)
	}
	defer pk.Free()
	for _, w := range windows {
		from, wl := w[0], w[1]
		fill := bytes.Repeat([]byte{0xA5}, int(total+2*g))
		pk.Write(0, fill)
		got, err := d.Pack(ctx, pk, g, src, from, wl)
		if err != nil || got != wl {
			t.Fatalf("%v count %d: Pack(from %d, %d) = %d, %v\n%s", ty, count, from, wl, got, err, ty.DumpIR())
		}
		out := make([]byte, total+2*g)
		pk.Read(0, out)
		if !bytes.Equal(out[g:g+wl], want[from:from+wl]) {
			t.Fatalf("%v count %d: Pack(from %d, %d) bytes differ\n%s", ty, count, from, wl, ty.DumpIR())
		}
		if !bytes.Equal(out[:g], fill[:g]) || !bytes.Equal(out[g+wl:], fill[g+wl:]) {
			t.Fatalf("%v: Pack wrote outside its window", ty)
		}
		// Unpack a random stream window into the typed buffer.
		stream := make([]byte, wl)
		for i := range stream {
			stream[i] = byte(r.Uint32())
		}
		pk.Write(g, stream)
		if got, err := d.Unpack(ctx, src, pk, g, from, wl); err != nil || got != wl {
			t.Fatalf("%v: Unpack(from %d, %d) = %d, %v", ty, from, wl, got, err)
		}
		after := make([]byte, len(host))
		typedBuf.Read(0, after)
		wantT := ddttest.UnpackRange(ty, host[g+shift:g+shift+int64(n)], stream, base, count, from)
		if !bytes.Equal(after[:g+shift], host[:g+shift]) || !bytes.Equal(after[g+shift+int64(n):], host[g+shift+int64(n):]) {
			t.Fatalf("%v: Unpack wrote a guard byte", ty)
		}
		if !bytes.Equal(after[g+shift:g+shift+int64(n)], wantT) && !racyUnpackOK(ty, host[g+shift:g+shift+int64(n)], after[g+shift:g+shift+int64(n)], stream, base, count, from) {
			t.Fatalf("%v count %d: Unpack(from %d, %d) bytes differ\n%s", ty, count, from, wl, ty.DumpIR())
		}
		typedBuf.Write(0, host)
	}
}

// TestPTXSimRandomTypes runs the emitted PTX, in the simulator, for random
// types, the 3-D launch and both 1-D element splits, through the Device code a GPU uses.
func TestPTXSimRandomTypes(t *testing.T) {
	n := 120
	if testing.Short() {
		n = 50
	}
	r := rand.New(rand.NewPCG(22, 1))
	for mode, wide := range []bool{false, false, true} {
		d := newSimDevice()
		d.forceWide, d.grid1D = wide, mode == 1 // the 3-D launch, the 1-D ones
		for i := 0; i < n; i++ {
			ty := committed(t, ddttest.RandomType(r, 4))
			if _, err := PlanOf(ty); err != nil {
				continue
			}
			deviceCheck(t, d, ty, r.IntN(4), r)
		}
		st := d.be.(*simBackend).stats
		if st.Instructions == 0 || d.Stats().Builds == 0 {
			t.Fatalf("nothing ran: %+v %+v", st, d.Stats())
		}
		t.Logf("mode %d: %d kernels built, %d launches, %d threads, %d instructions simulated", mode, d.Stats().Builds, d.Stats().Launches, st.Threads, st.Instructions)
	}
}

// racyUnpackOK reports whether after is a correct unpack of the stream
// window into typed when the type's blocks overlap: a byte written by one
// stream position must hold that byte, a byte written by several (threads
// race on it, as MPI leaves it undefined) one of theirs, and every other
// byte its old value.
func racyUnpackOK(ty *ddt.Type, typed, after, window []byte, base int64, count int, from int64) bool {
	writers := map[int64][]byte{}
	m := ddttest.TypeMap(ty)
	q := int64(0)
	end := from + int64(len(window))
	for k := 0; k < count; k++ {
		o := base + int64(k)*ty.Extent()
		for _, e := range m {
			for b := int64(0); b < e.Size; b++ {
				if q >= from && q < end {
					writers[o+e.Disp+b] = append(writers[o+e.Disp+b], window[q-from])
				}
				q++
			}
		}
	}
	for i := range after {
		w, ok := writers[int64(i)]
		if !ok {
			if after[i] != typed[i] {
				return false
			}
			continue
		}
		if !bytes.Contains(w, after[i:i+1]) {
			return false
		}
	}
	return true
}

// ddtFill fills b with a fixed pseudo-random pattern.
func ddtFill(b []byte) {
	x := uint32(12345)
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
}
