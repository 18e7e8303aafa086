package fabric

/*
#include "shim.h"
*/
import "C"

import "github.com/weft-hpc/weft/internal/settings"

// DefaultPollPace is the default of SetPollPace: one clock read between
// two empty polls.
const DefaultPollPace = 1

// maxPollPace bounds SetPollPace. A fast call spins at most FastSpinMax
// rounds without a safe point; at 8 reads a round that is ~0.8 ms here,
// and longer pauses between polls only add latency.
const maxPollPace = 8

// The initial pace is WEFT_TUNE's pollpace (a bad WEFT_TUNE leaves the
// default; the first GetInfo reports the error).
func init() {
	t, _ := settings.Tune()
	SetPollPace(int(t.PollPace))
}

// SetPollPace sets how the spinning calls (CQ.ReadSpin, CQ.WaitWord,
// CQ.ReadSignals, CQ.WaitWordSignals, CQ.Poll, Endpoint.PostAndRead,
// Counter.Wait) pace their polls, and returns the previous setting:
// after a poll that found nothing they read the monotonic clock reads times
// (about 20 ns each on x86-64 Linux) before polling again. 0 polls back to
// back; values are clamped to [0, 8]. The default is DefaultPollPace, or
// the pollpace knob of WEFT_TUNE (docs/tuning.md). The setting is
// process-wide and takes effect at once.
//
// Why: on shm a poll takes the provider's locks and reads its queues in
// shared memory, which the peer delivering the awaited message also
// writes. Back-to-back polls measured slower when the two processes ran
// on nearby cores (the VM's fast regime): an 8-byte ping-pong paced by one
// clock read was 1.12× fi_pingpong there against 1.16× unpaced, and the
// same elsewhere (docs/perf/fabric.md, "Fifth pass"). Two reads per poll
// measured worse than one.
func SetPollPace(reads int) int {
	return int(C.weft_set_poll_pace(C.int(min(max(reads, 0), maxPollPace))))
}
