package fabric

import (
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/settings"
)

// DefaultPollPace is the initial default of SetPollPace: one clock read
// between two empty polls.
const DefaultPollPace = 1

// maxPollPace bounds the pace. A fast call spins at most FastSpinMax
// rounds without a safe point; at 8 reads a round that is ~0.8 ms here,
// and longer pauses between polls only add latency.
const maxPollPace = 8

// pollPaceDefault is the process-wide default pace, read when a domain is
// opened (defaultDomainConfig).
var pollPaceDefault atomic.Int32

// The initial pace is WEFT_TUNE's pollpace (a bad WEFT_TUNE leaves the
// default; the first GetInfo reports the error).
func init() {
	t, _ := settings.Tune()
	pollPaceDefault.Store(int32(min(max(t.PollPace, 0), maxPollPace)))
}

// SetPollPace sets the process-wide default of how the spinning calls
// (CQ.ReadSpin, CQ.WaitWord, CQ.ReadSignals, CQ.WaitWordSignals, CQ.Poll,
// Endpoint.PostAndRead, Counter.Wait) pace their polls, and returns the
// previous default: after a poll that found nothing they read the
// monotonic clock reads times (about 20 ns each on x86-64 Linux) before
// polling again. 0 polls back to back; values are clamped to [0, 8]. The
// initial default is DefaultPollPace, or the pollpace knob of WEFT_TUNE
// (docs/tuning.md). It applies to domains opened from now on that do not
// set their own (WithPollPace); the CQs and counters of a domain keep the
// pace the domain was opened with.
//
// Why: on shm a poll takes the provider's locks and reads its queues in
// shared memory, which the peer delivering the awaited message also
// writes. Back-to-back polls measured slower when the two processes ran
// on nearby cores (the VM's fast regime): an 8-byte ping-pong paced by one
// clock read was 1.12× fi_pingpong there against 1.16× unpaced, and the
// same elsewhere (docs/perf/fabric.md, "Fifth pass"). Two reads per poll
// measured worse than one.
func SetPollPace(reads int) int {
	return int(pollPaceDefault.Swap(int32(min(max(reads, 0), maxPollPace))))
}
