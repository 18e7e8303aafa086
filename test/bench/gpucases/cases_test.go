package gpucases

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/internal/gputools"
	"github.com/weft-hpc/weft/internal/testenv"
	"github.com/weft-hpc/weft/test/bench/internal/ddtcases"
)

// cases returns every layout at size s (and m without -short).
func cases(t *testing.T) []*ddtcases.Case {
	var out []*ddtcases.Case
	sizes := []string{"s", "m"}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, name := range ddtcases.Names() {
		for _, s := range sizes {
			c, err := ddtcases.Build(name, s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
	}
	return out
}

// TestEmulatorCases packs and unpacks every case through the plan's Go
// evaluator, whole and in random windows, against ddt's interpreter, with
// guard bytes after the packed window.
func TestEmulatorCases(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 22))
	for _, c := range cases(t) {
		p, err := gpu.NewPlan(c.Type)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		typed := make([]byte, c.Typed)
		ddtcases.Fill(typed, 1)
		want := make([]byte, c.Bytes)
		if _, err := c.Type.PackRange(want, typed, 0, c.Count, 0); err != nil {
			t.Fatal(err)
		}
		k := p.Emulator()
		windows := [][2]int64{{0, c.Bytes}}
		for range 3 {
			from := r.Int64N(c.Bytes)
			windows = append(windows, [2]int64{from, 1 + r.Int64N(min(c.Bytes-from, 1<<16))})
		}
		for _, w := range windows {
			buf := bytes.Repeat([]byte{0xA5}, int(w[1])+64)
			n, err := k.Pack(buf[:w[1]], typed, 0, c.Count, w[0])
			if err != nil || int64(n) != w[1] || !bytes.Equal(buf[:n], want[w[0]:w[0]+w[1]]) || !bytes.Equal(buf[n:], bytes.Repeat([]byte{0xA5}, 64)) {
				t.Fatalf("%v: emulated pack of [%d,+%d): %d, %v", c, w[0], w[1], n, err)
			}
			// Unpack the same window into a zeroed buffer; compare with the
			// interpreter's unpack.
			got, exp := make([]byte, c.Typed), make([]byte, c.Typed)
			if _, err := k.Unpack(got, buf[:n], 0, c.Count, w[0]); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Type.UnpackRange(exp, buf[:n], 0, c.Count, w[0]); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, exp) {
				t.Fatalf("%v: emulated unpack of [%d,+%d) differs", c, w[0], w[1])
			}
		}
	}
}

// TestOpenCLCases runs every case's generated OpenCL C kernels on the
// first OpenCL device against ddt's interpreter (the kernels whatever the
// device's cost model would choose).
func TestOpenCLCases(t *testing.T) {
	d, err := gpu.OpenOpenCL(0)
	if errors.Is(err, errs.ErrNotSupported) {
		testenv.Skip(t, "opencl", "%v (deploy/install-gpu-tools.sh installs pocl)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.SetMethod(gpu.MethodKernel); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range cases(t) {
		if c.Size != "s" {
			continue
		}
		typed := make([]byte, c.Typed)
		ddtcases.Fill(typed, 3)
		want := make([]byte, c.Bytes)
		c.Type.PackRange(want, typed, 0, c.Count, 0)
		tb, err := d.Alloc(int64(c.Typed))
		if err != nil {
			t.Fatal(err)
		}
		pb, err := d.Alloc(c.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		tb.Write(0, typed)
		src := gpu.Typed{Type: c.Type, Buf: tb, Count: c.Count}
		// Whole, then in four resumed windows.
		for _, parts := range []int64{1, 4} {
			step := (c.Bytes + parts - 1) / parts
			for from := int64(0); from < c.Bytes; from += step {
				if _, err := d.Pack(ctx, pb, from, src, from, step); err != nil {
					t.Fatalf("%v: %v", c, err)
				}
			}
			got := make([]byte, c.Bytes)
			pb.Read(0, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("%v: OpenCL pack in %d windows differs", c, parts)
			}
		}
		// Unpack into a zeroed buffer.
		tb.Write(0, make([]byte, c.Typed))
		if _, err := d.Unpack(ctx, src, pb, 0, 0, c.Bytes); err != nil {
			t.Fatal(err)
		}
		got, exp := make([]byte, c.Typed), make([]byte, c.Typed)
		tb.Read(0, got)
		c.Type.UnpackRange(exp, want, 0, c.Count, 0)
		if !bytes.Equal(got, exp) {
			t.Fatalf("%v: OpenCL unpack differs", c)
		}
		tb.Free()
		pb.Free()
	}
}

// TestPtxasCases assembles every word size's kernels of every case for
// sm_80 and sm_90: no spills, at most 32 registers.
func TestPtxasCases(t *testing.T) {
	if _, err := gputools.Ptxas(); err != nil {
		testenv.Skip(t, "ptxas", "%v", err)
	}
	var b strings.Builder
	b.WriteString(".version 7.8\n.target sm_80\n.address_size 64\n")
	seen := map[*gpu.Plan]bool{}
	kernels := 0
	for _, c := range cases(t) {
		if c.Size != "s" {
			continue // the m sizes differ only in constants
		}
		p, err := gpu.NewPlan(c.Type)
		if err != nil || seen[p] {
			continue
		}
		seen[p] = true
		for w := int64(1); w <= p.MaxWord(); w *= 2 {
			src, _ := p.PTX(w)
			_, body, _ := strings.Cut(src, ".address_size 64\n")
			b.WriteString(body)
			kernels += strings.Count(body, ".entry ")
		}
	}
	for _, arch := range []string{"sm_80", "sm_90"} {
		fs, err := gputools.Assemble(b.String(), arch, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != kernels {
			t.Fatalf("%s: %d kernels reported, want %d", arch, len(fs), kernels)
		}
		for _, f := range fs {
			if f.SpillStores+f.SpillLoads+f.Stack != 0 || f.Registers > 32 {
				t.Errorf("%s %s: %+v", arch, f.Name, f)
			}
		}
	}
}
