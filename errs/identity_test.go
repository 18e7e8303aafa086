package errs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weft-hpc/weft/am"
	"github.com/weft-hpc/weft/collectives"
	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/gpu"
	"github.com/weft-hpc/weft/jit"
	"github.com/weft-hpc/weft/job"
	"github.com/weft-hpc/weft/onesided"
)

// TestSentinelIdentity: every package's name for a shared failure class is
// the one value of package errs, so errors.Is answers the same whichever
// package's name the caller tests with and whichever layer wrapped it.
func TestSentinelIdentity(t *testing.T) {
	same := map[error][]struct {
		name string
		err  error
	}{
		errs.ErrInvalid: {
			{"endpoint.ErrInvalid", endpoint.ErrInvalid},
			{"onesided.ErrInvalid", onesided.ErrInvalid},
			{"ddt.ErrInvalid", ddt.ErrInvalid},
			{"fabric.ErrInvalid", fabric.ErrInvalid},
			{"job.ErrInvalid", job.ErrInvalid},
			{"collectives.ErrInvalid", collectives.ErrInvalid},
			{"am.ErrInvalid", am.ErrInvalid},
		},
		errs.ErrNotSupported: {
			{"endpoint.ErrNotSupported", endpoint.ErrNotSupported},
			{"onesided.ErrNotSupported", onesided.ErrNotSupported},
			{"fabric.ErrNotSupported", fabric.ErrNotSupported},
		},
		errs.ErrClosed: {
			{"endpoint.ErrClosed", endpoint.ErrClosed},
			{"onesided.ErrClosed", onesided.ErrClosed},
			{"fabric.ErrClosed", fabric.ErrClosed},
			{"job.ErrClosed", job.ErrClosed},
			{"collectives.ErrClosed", collectives.ErrClosed},
			{"am.ErrClosed", am.ErrClosed},
		},
		errs.ErrTimeout:    {{"onesided.ErrTimeout", onesided.ErrTimeout}},
		errs.ErrPeerGone:   {{"endpoint.ErrPeerGone", endpoint.ErrPeerGone}, {"onesided.ErrPeerGone", onesided.ErrPeerGone}, {"collectives.ErrPeerGone", collectives.ErrPeerGone}, {"am.ErrPeerGone", am.ErrPeerGone}},
		errs.ErrTruncated:  {{"endpoint.ErrTruncated", endpoint.ErrTruncated}, {"fabric.ErrTruncated", fabric.ErrTruncated}, {"collectives.ErrTruncated", collectives.ErrTruncated}, {"am.ErrTruncated", am.ErrTruncated}},
		errs.ErrCanceled:   {{"endpoint.ErrCanceled", endpoint.ErrCanceled}, {"fabric.ErrCanceled", fabric.ErrCanceled}, {"collectives.ErrCanceled", collectives.ErrCanceled}},
		errs.ErrRemote:     {{"am.ErrRemote", am.ErrRemote}},
		errs.ErrOutOfRange: {{"onesided.ErrOutOfRange", onesided.ErrOutOfRange}, {"ddt.ErrBounds", ddt.ErrBounds}, {"collectives.ErrOutOfRange", collectives.ErrOutOfRange}},
	}
	for want, names := range same {
		for _, n := range names {
			if n.err != want {
				t.Errorf("%s is %q, not the shared errs sentinel %q", n.name, n.err, want)
			}
			wrapped := fmt.Errorf("layer: call: %w", n.err)
			for _, other := range names {
				if !errors.Is(wrapped, other.err) {
					t.Errorf("errors.Is(wrapped %s, %s) = false", n.name, other.name)
				}
			}
		}
	}
	// jit's platform error is its own value but a kind of ErrNotSupported.
	if !errors.Is(jit.ErrUnsupported, errs.ErrNotSupported) {
		t.Errorf("jit.ErrUnsupported does not wrap errs.ErrNotSupported")
	}
	// gpu's errors are kinds of the shared sentinels.
	for name, e := range map[string]error{"gpu.ErrDeclined": gpu.ErrDeclined, "gpu.ErrNoDevice": gpu.ErrNoDevice} {
		if !errors.Is(e, errs.ErrNotSupported) {
			t.Errorf("%s does not wrap errs.ErrNotSupported", name)
		}
	}
	if !errors.Is(gpu.ErrClosed, errs.ErrClosed) {
		t.Errorf("gpu.ErrClosed does not wrap errs.ErrClosed")
	}
	// A libfabric errno maps onto the shared sentinels too.
	if !errors.Is(&fabric.Error{Op: "fi_x", Errno: 22}, endpoint.ErrInvalid) {
		t.Errorf("fabric EINVAL is not endpoint.ErrInvalid")
	}
}
