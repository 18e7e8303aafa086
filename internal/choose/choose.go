// Package choose picks between two ways of doing the same work (two
// protocols for a message, two kinds of stores for a copy) by timing
// them where they run: which is faster depends on the machine, and on
// some virtual machines on where the host runs the vCPUs, minutes apart,
// so no fixed threshold fits (RATIONALE.md).
//
// A Pair keeps, per power-of-two size class, an estimate of the time per
// byte of each way. Pick tries each way twice in a class (the first
// sample is taken cold and replaced by the second), then returns the
// faster, but the other in one call of every ProbeEvery, so that a change
// of the machine's behaviour is seen. A Pair is not safe for concurrent
// use: each user (a link, a handle) owns one.
package choose

import (
	"math/bits"
	"time"
)

// Classes is the number of size classes: class c holds sizes from
// 2^(12+c) up to 2^(13+c) bytes, class 0 everything below 8 KiB, class
// Classes-1 everything from 128 MiB on.
const Classes = 16

// ProbeEvery: one call in ProbeEvery of a size class goes the way that
// is not the faster. Where the ways differ by 2× that costs 1.5% of the
// class's time.
const ProbeEvery = 64

// Pair is the two ways' estimates for one user.
type Pair struct {
	est   [2][Classes]float32 // ns per byte; 0: not measured
	seen  [2][Classes]uint8   // samples of each way, counted up to 3
	calls [Classes]uint32
}

// Class is the size class of n bytes.
func Class(n int) int {
	return min(max(bits.Len(uint(n))-13, 0), Classes-1)
}

// Pick returns the way (0 or 1) of a call of n bytes, which the caller
// times and reports with Learn: while a way of its class has fewer than
// two samples, the one with fewer (way 0 on a tie); then the faster, but
// the other in one call of every ProbeEvery.
func (p *Pair) Pick(n int) int {
	c := Class(n)
	p.calls[c]++
	if s0, s1 := p.seen[0][c], p.seen[1][c]; s0 < 2 || s1 < 2 {
		if s1 < s0 {
			return 1
		}
		return 0
	}
	best, _ := p.Faster(n)
	if p.calls[c]%ProbeEvery == 0 {
		return 1 - best
	}
	return best
}

// Faster returns the faster way for n bytes, and false (with way 0)
// while either way has fewer than two samples in its class.
func (p *Pair) Faster(n int) (way int, known bool) {
	c := Class(n)
	if p.seen[0][c] < 2 || p.seen[1][c] < 2 {
		return 0, false
	}
	if p.est[1][c] < p.est[0][c] {
		return 1, true
	}
	return 0, true
}

// Estimate returns the estimated time per byte (ns) of way for n bytes
// (0: not measured).
func (p *Pair) Estimate(way, n int) float64 { return float64(p.est[way&1][Class(n)]) }

// Learn folds in a call of n bytes by way that took d. The first two
// samples of a way in a class set its estimate; after them a faster
// sample moves it halfway down and a slower one an eighth of the way up:
// a call that waited for a late peer is slow for reasons of its own, and
// the estimates compare the ways, not the peers. A way chosen on a
// sample too fast is measured again at its next call and climbs back
// within a few.
func (p *Pair) Learn(way, n int, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	way &= 1
	s := float32(d) / float32(n)
	c := Class(n)
	e := &p.est[way][c]
	seen := &p.seen[way][c]
	if *seen < 3 {
		*seen++
	}
	switch {
	case *seen <= 2:
		*e = s
	case s < *e:
		*e += (s - *e) / 2
	default:
		*e += (s - *e) / 8
	}
}
