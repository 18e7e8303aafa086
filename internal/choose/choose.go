// Package choose picks between two ways of doing the same work (two
// protocols for a message, two kinds of stores for a copy) by timing
// them where they run: which is faster depends on the machine, and on
// some virtual machines on where the host runs the vCPUs, minutes apart,
// so no fixed threshold fits (RATIONALE.md).
//
// A Pair keeps, per power-of-two size class, an estimate of the time per
// byte of each way. Pick tries each way warmUp times in a class, the
// fastest of those samples setting its estimate (the first ones are taken
// cold: page faults, empty caches), then returns the faster, trying the
// other again now and then (ProbeInterval), so that a change of the
// machine's behaviour is seen. A Pair is not safe for concurrent use:
// each user (a link, a handle) owns one.
package choose

import (
	"math/bits"
	"time"
)

// Classes is the number of size classes: class c holds sizes from
// 2^(12+c) up to 2^(13+c) bytes, class 0 everything below 8 KiB, class
// Classes-1 everything from 128 MiB on.
const Classes = 16

// warmUp is how many samples of each way a class takes before the
// estimates decide: at 4 MiB a node link's first two samples of each way
// ran 1.5–6× their steady time.
const warmUp = 3

// In the earlyCalls calls of a class after its warm-up the other way is
// tried every earlyEvery calls, unless its estimate is earlyGap times the
// taken way's or more: warm-up samples can all be cold (at 4 MiB a link's
// single copies took 500–750 µs in warm-up and 355 after, against 474
// for the other way), and a run of a hundred calls would otherwise keep
// the way they chose; but where the ways lie far apart (a node link's
// pipelined copy at 1.9–2.9 times the single copy's time on one host, a
// typed send's streamed fragments at 1.7 times its plain ones) those
// tries cost a run of a few hundred calls several percent and change
// nothing. The later tries (ProbeInterval) still come.
const (
	earlyCalls = 64
	earlyEvery = 8
	earlyGap   = 1.5
)

// maxRise bounds what one slow sample does to an estimate: a call that
// lost the core for 0.6 ms, a hundred times a 64 KiB message's time, took
// the estimate up thirteenfold with an eighth of the way, and the other
// way was taken for the tenths of a second its tries needed to bring it
// back.
const maxRise = 1.25

// hysteresis is the fraction by which the other way's estimate must be
// lower for the way taken to change.
const hysteresis = 0.1

// The way not taken is tried again after ProbeCalls calls of the class
// once ProbeInterval has passed since its last try, and after
// ProbeMaxCalls calls in any case: the host's placement of the vCPUs,
// which can change which way is faster, lasts minutes, but a wrong
// choice from cold first samples must not last a whole run. A try costs
// more than the way's steady time (a 64 KiB pipelined copy, its slots
// cold, took 30–70 µs against 10), and a try in every 256 calls of 4 µs
// cost a tenth of the time; one in 1024 costs about 1%.
const (
	ProbeInterval = 50 * time.Millisecond
	ProbeCalls    = 64
	ProbeMaxCalls = 1024
)

// Pair is the two ways' estimates for one user.
type Pair struct {
	est   [2][Classes]float32 // ns per byte; 0: not measured
	seen  [2][Classes]uint8   // samples of each way, counted up to warmUp+1
	cur   [Classes]uint8      // the way taken (once warm)
	calls [Classes]uint32     // since the last try of the other way
	early [Classes]uint8      // calls since warm-up, counted up to earlyCalls
	probe [Classes]time.Time  // the last try of the other way
}

// Class is the size class of n bytes.
func Class(n int) int {
	return min(max(bits.Len(uint(n))-13, 0), Classes-1)
}

// Pick returns the way (0 or 1) of a call of n bytes starting at now,
// which the caller times and reports with Learn: while a way of its class
// has fewer than warmUp samples, the one with fewer (way 0 on a tie);
// then the faster, but the other every earlyEvery calls in the first
// earlyCalls while its estimate is within earlyGap times the faster's,
// and later after ProbeCalls calls once ProbeInterval has
// passed since it was last tried, or after ProbeMaxCalls calls.
func (p *Pair) Pick(n int, now time.Time) int {
	c := Class(n)
	p.calls[c]++
	if s0, s1 := p.seen[0][c], p.seen[1][c]; s0 < warmUp || s1 < warmUp {
		p.probe[c] = now
		if s1 < s0 {
			return 1
		}
		return 0
	}
	best, _ := p.Faster(n)
	if p.early[c] < earlyCalls {
		p.early[c]++
		if p.early[c]%earlyEvery == 0 && p.est[1-best][c] < p.est[best][c]*earlyGap {
			p.calls[c], p.probe[c] = 0, now
			return 1 - best
		}
		return best
	}
	if p.calls[c] >= ProbeMaxCalls || p.calls[c] >= ProbeCalls && now.Sub(p.probe[c]) >= ProbeInterval {
		p.calls[c], p.probe[c] = 0, now
		return 1 - best
	}
	return best
}

// Faster returns the way the pair takes for n bytes, the faster, and
// false (with way 0) while either way has fewer than warmUp samples in its
// class.
//
// The way taken changes only when the other's estimate is lower by more
// than a tenth (hysteresis): two ways within the samples' noise of each
// other would otherwise alternate on lucky samples.
func (p *Pair) Faster(n int) (way int, known bool) {
	c := Class(n)
	if p.seen[0][c] < warmUp || p.seen[1][c] < warmUp {
		return 0, false
	}
	cur := int(p.cur[c])
	if p.est[1-cur][c] < p.est[cur][c]*(1-hysteresis) {
		cur = 1 - cur
		p.cur[c] = uint8(cur)
	}
	return cur, true
}

// Estimate returns the estimated time per byte (ns) of way for n bytes
// (0: not measured).
func (p *Pair) Estimate(way, n int) float64 { return float64(p.est[way&1][Class(n)]) }

// Learn folds in a call of n bytes by way that took d. The fastest of the
// first warmUp samples of a way in a class sets its estimate; after them
// a faster sample moves it halfway down and a slower one an eighth of the
// way up, by at most a quarter (maxRise): a call that waited for a late peer is slow for reasons of its
// own, and the estimates compare the ways, not the peers. A way chosen on
// a sample too fast is measured again at its next call and climbs back
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
	if *seen <= warmUp {
		*seen++
	}
	switch {
	case *seen == 1 || *seen <= warmUp && s < *e:
		*e = s
	case *seen <= warmUp:
	case s < *e:
		*e += (s - *e) / 2
	default:
		*e = min(*e+(s-*e)/8, *e*maxRise)
	}
}

// LearnFaster is Learn, then Faster: it returns the way the pair now
// takes for n bytes and whether that way became known or changed with
// this sample (for a user that reports changes).
func (p *Pair) LearnFaster(way, n int, d time.Duration) (faster int, changed bool) {
	was, known := p.Faster(n)
	p.Learn(way, n, d)
	faster, ok := p.Faster(n)
	return faster, ok && (!known || faster != was)
}
