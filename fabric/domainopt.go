package fabric

import (
	"fmt"
	"time"
)

// DomainOption configures a domain and the CQs, counters and endpoints
// opened from it (OpenDomain). Each setting defaults to the process-wide
// default of the moment the domain is opened: WEFT_FASTCALL and WEFT_TUNE's
// pollpace and pollyield, or what SetFastCall, SetPollPace and
// SetPollYield last set.
type DomainOption func(*domainConfig)

// domainConfig is a domain's polling and fast-call configuration, copied
// into each CQ, counter and endpoint when it is opened.
type domainConfig struct {
	fast  FastCall
	pace  int           // clock reads between two empty polls, 0..maxPollPace
	yield time.Duration // poll-yield interval; 0: off
	// yieldHook replaces runtime.Gosched in the poll yield of the
	// domain's CQs (tests count yields through it); nil: Gosched.
	yieldHook func()
	// napHook replaces the sleep of CQ.Poll between bursts in the
	// domain's CQs (tests record sleeps through it); nil: nanosleep.
	napHook func(time.Duration)
	err     error // the first bad option
}

// defaultDomainConfig returns the process-wide defaults of now.
func defaultDomainConfig() domainConfig {
	return domainConfig{
		fast:  FastCall(fastMode.Load()),
		pace:  int(pollPaceDefault.Load()),
		yield: time.Duration(pollYieldNanos.Load()),
	}
}

func (c *domainConfig) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("fabric: OpenDomain: "+format+": %w", append(args, ErrInvalid)...)
	}
}

// WithFastCall sets how the domain's CQs and endpoints enter C on their hot
// paths (see SetFastCall for the modes). A mode other than FastCallAuto,
// FastCallOn and FastCallOff makes OpenDomain fail with ErrInvalid.
func WithFastCall(m FastCall) DomainOption {
	return func(c *domainConfig) {
		if m < FastCallAuto || m > FastCallOff {
			c.fail("fast-call mode %v", m)
			return
		}
		c.fast = m
	}
}

// WithPollPace sets how many monotonic-clock reads the spinning calls on
// the domain's CQs and counters make after a poll that found nothing (see
// SetPollPace). reads outside [0, 8] makes OpenDomain fail with ErrInvalid.
func WithPollPace(reads int) DomainOption {
	return func(c *domainConfig) {
		if reads < 0 || reads > maxPollPace {
			c.fail("poll pace %d (want 0..%d)", reads, maxPollPace)
			return
		}
		c.pace = reads
	}
}

// WithPollYield sets how often a goroutine polling the domain's CQs through
// cgo yields the processor (see SetPollYield); 0 turns the yield off. A
// negative interval makes OpenDomain fail with ErrInvalid.
func WithPollYield(d time.Duration) DomainOption {
	return func(c *domainConfig) {
		if d < 0 {
			c.fail("poll yield %v", d)
			return
		}
		c.yield = d
	}
}

// FastCall returns the domain's fast-call mode (WithFastCall).
func (d *Domain) FastCall() FastCall {
	if d == nil {
		return 0
	}
	return d.cfg.fast
}

// PollPace returns the domain's poll pace (WithPollPace).
func (d *Domain) PollPace() int {
	if d == nil {
		return 0
	}
	return d.cfg.pace
}

// PollYield returns the domain's poll-yield interval (WithPollYield).
func (d *Domain) PollYield() time.Duration {
	if d == nil {
		return 0
	}
	return d.cfg.yield
}
