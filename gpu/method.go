package gpu

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/errs"
)

// Method is how a Device moves non-contiguous data between a typed layout
// and a packed buffer. Contiguous data always takes one device copy.
type Method int

const (
	// MethodAuto lets the device's cost model choose (the default).
	MethodAuto Method = iota
	// MethodKernel is the generated pack or unpack kernel.
	MethodKernel
	// MethodRect is one 2-D DMA copy (cuMemcpy2D, clEnqueueCopyBufferRect)
	// for a layout that is rows of equal length at a constant pitch, plus
	// a copy for a partial first and last row.
	MethodRect
	// MethodBlocks is one DMA copy per contiguous block (cuMemcpyDtoD,
	// clEnqueueCopyBuffer), for layouts of at most 1024 blocks (all
	// elements together).
	MethodBlocks
)

// String returns the method's name as SetMethod's callers and the
// benchmarks write it: auto, kernel, rect or blocks.
func (m Method) String() string {
	switch m {
	case MethodAuto:
		return "auto"
	case MethodKernel:
		return "kernel"
	case MethodRect:
		return "rect"
	case MethodBlocks:
		return "blocks"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// maxDMABlocks is the most blocks a pack may move by per-block copies.
const maxDMABlocks = 1024

// SetMethod forces how later packs and unpacks of non-contiguous data
// move their bytes (benchmarks compare the methods this way); MethodAuto
// restores the cost model's choice. A forced method that does not apply
// to a layout (MethodRect for a layout that is not rows at a constant
// pitch, MethodBlocks beyond 1024 blocks, a DMA method on a runtime
// without copies) leaves that layout to the kernel. Errors: errs.ErrInvalid
// for an unknown method, ErrClosed.
func (d *Device) SetMethod(m Method) error {
	if !d.ok() {
		return errNoDevice
	}
	if m < MethodAuto || m > MethodBlocks {
		return fmt.Errorf("gpu: SetMethod(%v): %w", m, errs.ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.method = m
	return nil
}

// dmaer is implemented by the runtimes whose copies the measured choice
// may use instead of a kernel.
type dmaer interface {
	rect(dst mem, doff, dpitch int64, src mem, soff, spitch, width, height int64) error
	copyList(dst, src mem, doffs, soffs, lens []int64) error
}

// costModel predicts the time of each method from coefficients measured
// once per device (calibrate), in seconds.
type costModel struct {
	kFix, kByte float64 // a kernel launch; per packed byte
	cFix, cByte float64 // one copy call; per byte copied
	rFix, rRow  float64 // one 2-D copy call; per row (its bytes at cByte)
	took        time.Duration
	err         error // the calibration failed: the kernel always
}

func (c *costModel) String() string {
	if c.err != nil {
		return "kernel only: " + c.err.Error()
	}
	return fmt.Sprintf("kernel %.1fµs+%.3fns/B, copy %.1fµs+%.3fns/B, rect %.1fµs+%.1fns/row (calibrated in %v)",
		c.kFix*1e6, c.kByte*1e9, c.cFix*1e6, c.cByte*1e9, c.rFix*1e6, c.rRow*1e9, c.took.Round(time.Microsecond))
}

func (c *costModel) kernel(nb int64) float64 { return c.kFix + float64(nb)*c.kByte }
func (c *costModel) rectCost(rows, pieces, nb int64) float64 {
	return c.rFix + float64(rows)*c.rRow + float64(pieces)*c.cFix + float64(nb)*c.cByte
}
func (c *costModel) blocks(n, nb int64) float64 { return float64(n)*c.cFix + float64(nb)*c.cByte }

// dmaJob is a pack or unpack done by copies: pieces (typed offset, packed
// offset, length) and at most one 2-D copy of rows rows of width bytes,
// typed rows pitch apart from rowT, packed back to back from rowP.
type dmaJob struct {
	m                  Method
	toffs, poffs, lens []int64
	rowT, rowP         int64
	width, pitch, rows int64
}

// rows describes count elements of p, the typed origin at base, as rows
// of equal width at a constant pitch (below 1 GiB, within every
// runtime's 2-D copy limits), the first at typed byte first.
func (p *Plan) rows(base int64, count int) (first, width, pitch, n int64, ok bool) {
	switch {
	case p.extent >= 1<<30 || len(p.levels) == 1 && p.levels[0].stride >= 1<<30:
		return 0, 0, 0, 0, false
	case len(p.levels) == 0 && !p.list && p.extent > p.size:
		return base + p.disp, p.size, p.extent, int64(count), true
	case len(p.levels) == 1 && !p.list && p.levels[0].tab < 0 && p.levels[0].stride > p.unit &&
		(count == 1 || p.extent == p.levels[0].count*p.levels[0].stride):
		l := p.levels[0]
		return base + p.disp, p.unit, l.stride, l.count * int64(count), true
	}
	return 0, 0, 0, 0, false
}

// rectJob maps the stream window [from, from+nb) of rows onto a 2-D copy
// of the whole rows and pieces for the partial first and last ones.
func rectJob(first, width, pitch, from, nb, poff int64) *dmaJob {
	j := &dmaJob{m: MethodRect, width: width, pitch: pitch}
	r, o := from/width, from%width
	if o > 0 {
		k := min(width-o, nb)
		j.toffs, j.poffs, j.lens = append(j.toffs, first+r*pitch+o), append(j.poffs, poff), append(j.lens, k)
		r, poff, nb = r+1, poff+k, nb-k
	}
	j.rowT, j.rowP, j.rows = first+r*pitch, poff, nb/width
	r, poff, nb = r+j.rows, poff+j.rows*width, nb-j.rows*width
	if nb > 0 {
		j.toffs, j.poffs, j.lens = append(j.toffs, first+r*pitch), append(j.poffs, poff), append(j.lens, nb)
	}
	return j
}

// blockJob lists the blocks of the stream window [from, from+nb) of
// count elements of t at base, or nil beyond maxDMABlocks.
func blockJob(t *ddt.Type, base int64, count int, from, nb, poff int64) *dmaJob {
	segs, err := t.Flatten(count, maxDMABlocks)
	if err != nil || len(segs) > maxDMABlocks {
		return nil
	}
	j := &dmaJob{m: MethodBlocks}
	var s int64 // stream offset of the segment
	for _, g := range segs {
		lo, hi := max(s, from), min(s+g.Len, from+nb)
		if lo < hi {
			j.toffs = append(j.toffs, base+g.Off+lo-s)
			j.poffs = append(j.poffs, poff+lo-from)
			j.lens = append(j.lens, hi-lo)
		}
		s += g.Len
		if s >= from+nb {
			break
		}
	}
	return j
}

// chooseDMA returns the copies that move the window [from, from+nb) of ty
// to or from packed byte poff, when the forced method or the cost model
// prefers them to the kernel, else nil (a device whose copies fail to
// calibrate always takes the kernel). d.mu is held.
func (d *Device) chooseDMA(p *Plan, ty Typed, from, nb, poff int64) *dmaJob {
	if _, ok := d.be.(dmaer); !ok || d.method == MethodKernel {
		return nil
	}
	first, width, pitch, _, isRect := p.rows(ty.Base, ty.Count)
	total := p.size * int64(ty.Count)
	estBlocks := int64(0) // the window's blocks, about (0: the layout has too many)
	if b, err := ty.Type.Blocks(ty.Count); err == nil && b <= maxDMABlocks {
		estBlocks = b*nb/max(total, 1) + 2
	}
	switch d.method {
	case MethodRect:
		if isRect {
			return rectJob(first, width, pitch, from, nb, poff)
		}
		return nil
	case MethodBlocks:
		if estBlocks == 0 {
			return nil
		}
		return blockJob(ty.Type, ty.Base, ty.Count, from, nb, poff)
	}
	if !isRect && estBlocks == 0 {
		return nil
	}
	if d.cost == nil {
		st := d.stats // the calibration's launches and builds are not the user's
		c, err := d.calibrate()
		d.stats = st
		if err != nil { // copies that fail to calibrate are never chosen
			c = &costModel{cFix: math.Inf(1), rFix: math.Inf(1), err: err}
		}
		d.cost = c
	}
	c := d.cost
	best, bestCost := MethodKernel, c.kernel(nb)
	if isRect {
		if k := c.rectCost(nb/width+1, 2, nb); k < bestCost {
			best, bestCost = MethodRect, k
		}
	}
	if estBlocks > 0 {
		if k := c.blocks(estBlocks, nb); k < bestCost {
			best = MethodBlocks
		}
	}
	switch best {
	case MethodRect:
		return rectJob(first, width, pitch, from, nb, poff)
	case MethodBlocks:
		return blockJob(ty.Type, ty.Base, ty.Count, from, nb, poff)
	}
	return nil
}

// runDMA runs job between typed memory tm and packed memory pm.
func (d *Device) runDMA(j *dmaJob, tm, pm mem, unpack bool) error {
	dm := d.be.(dmaer)
	if j.rows > 0 {
		var err error
		if unpack {
			err = dm.rect(tm, j.rowT, j.pitch, pm, j.rowP, j.width, j.width, j.rows)
		} else {
			err = dm.rect(pm, j.rowP, j.width, tm, j.rowT, j.pitch, j.width, j.rows)
		}
		if err != nil {
			return err
		}
	}
	if unpack {
		return dm.copyList(tm, pm, j.toffs, j.poffs, j.lens)
	}
	return dm.copyList(pm, tm, j.poffs, j.toffs, j.lens)
}

// The calibration: a vector of 8-byte blocks at a 16-byte pitch, packed
// by its kernel at two sizes, by many small copies and one large one, and
// by 2-D copies of the same bytes in narrow and in wide rows.
const (
	calRows  = 32768 // rows of 8 bytes: 256 KiB packed
	calSmall = 4096  // bytes of the small kernel window
	// rows of 8 bytes of the 2-D probe (64 KiB), also moved as rows of 4 KiB
	calRectRows = 8192
)

var calType = sync.OnceValues(func() (*ddt.Type, error) {
	t, err := ddt.Vector(calRows, 1, 2, ddt.Float64)
	if err == nil {
		err = t.Commit()
	}
	return t, err
})

// calibrate measures the cost model's coefficients on d (d.mu held): the
// fastest of three runs of each probe, after one that builds and warms.
// The timed part takes a few milliseconds on a GPU.
func (d *Device) calibrate() (*costModel, error) {
	t, err := calType()
	if err != nil {
		return nil, err
	}
	p, err := PlanOf(t)
	if err != nil {
		return nil, err
	}
	dm := d.be.(dmaer)
	tm, err := d.be.alloc(2*8*calRows, false)
	if err != nil {
		return nil, err
	}
	defer d.be.free(tm)
	pm, err := d.be.alloc(8*calRows, false)
	if err != nil {
		return nil, err
	}
	defer d.be.free(pm)
	tb, pb := &Buffer{d: d, m: tm, n: 2 * 8 * calRows}, &Buffer{d: d, m: pm, n: 8 * calRows}
	var took time.Duration
	probe := func(f func() error) (float64, error) {
		best := time.Duration(1 << 62)
		for i := range 4 {
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			if el := time.Since(t0); i > 0 {
				best = min(best, el)
				took += el
			}
		}
		return best.Seconds(), nil
	}
	kern := func(n int64) func() error {
		return func() error {
			_, _, err := d.launchKernel(p, pb, 0, Typed{Type: t, Buf: tb, Count: 1}, 0, n, false, false)
			return err
		}
	}
	one := []int64{0}
	var offs, pos, lens []int64
	for i := range int64(64) {
		offs, pos, lens = append(offs, 16*i), append(pos, 8*i), append(lens, 8)
	}
	probes := []func() error{
		kern(calSmall), kern(8 * calRows),
		func() error { return dm.copyList(pm, tm, pos, offs, lens) },
		func() error { return dm.copyList(pm, tm, one, one, []int64{8 * calRows}) },
		func() error { return dm.rect(pm, 0, 8, tm, 0, 16, 8, calRectRows) },
		func() error { return dm.rect(pm, 0, 4096, tm, 0, 8192, 4096, 8*calRectRows/4096) },
	}
	var m [6]float64
	for i, f := range probes {
		if m[i], err = probe(f); err != nil {
			return nil, fmt.Errorf("gpu: calibrating the copy methods: %w", err)
		}
	}
	c := &costModel{took: took}
	big := float64(8 * calRows)
	c.kByte = max(0, (m[1]-m[0])/(big-calSmall))
	c.kFix = max(0, m[0]-calSmall*c.kByte)
	c.cFix = m[2] / 64
	c.cByte = max(0, (m[3]-c.cFix)/big)
	// The same 64 KiB as 8192 rows of 8 bytes and 16 rows of 4 KiB:
	// m4 - m5 = 8176 rRow.
	c.rRow = max(0, (m[4]-m[5])/float64(calRectRows-8*calRectRows/4096))
	c.rFix = max(0, m[5]-float64(8*calRectRows)*c.cByte-float64(8*calRectRows/4096)*c.rRow)
	return c, nil
}
