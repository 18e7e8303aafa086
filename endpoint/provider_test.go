package endpoint_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/job"
)

// TestProviderMismatch: two ranks that end with different providers (here
// by naming them differently; on a cluster, a node without the others'
// device) fail Init at once with ErrNotSupported, each naming the other
// rank's provider, instead of exchanging addresses they cannot read.
func TestProviderMismatch(t *testing.T) {
	if launch(t, 2, "tcp;ofi_rxm", 60*time.Second) {
		return
	}
	j, ctx := joinJob(t)
	prov := map[int]string{0: "tcp;ofi_rxm", 1: "sockets"}[j.Rank()]
	other := map[int]string{0: "sockets", 1: "tcp;ofi_rxm"}[j.Rank()]
	w, err := endpoint.Init(ctx, endpoint.WithJob(j), endpoint.WithProvider(prov), endpoint.WithNodeTransport(false))
	if err == nil {
		w.Close()
		t.Fatalf("rank %d: Init on %s succeeded with the other rank on %s", j.Rank(), prov, other)
	}
	if !errors.Is(err, endpoint.ErrNotSupported) || !strings.Contains(err.Error(), "uses provider "+other) {
		t.Fatalf("rank %d: Init = %v, want ErrNotSupported naming the other rank's %s", j.Rank(), err, other)
	}
}

// TestMatchHeaderMismatch: a rank that forces match-header mode (WEFT_TUNE
// epmatchhdr) while the other does not would frame its messages
// differently; both fail Init at once with ErrInvalid naming the setting.
func TestMatchHeaderMismatch(t *testing.T) {
	if launch(t, 2, "shm", 60*time.Second) {
		return
	}
	j, ctx := joinJob(t)
	endpoint.ForceMatchHeader(j.Rank() == 1)
	w, err := endpoint.Init(ctx, endpoint.WithJob(j), endpoint.WithNodeTransport(false))
	if err == nil {
		w.Close()
		t.Fatalf("rank %d: Init succeeded with epmatchhdr forced on rank 1 only", j.Rank())
	}
	if !errors.Is(err, endpoint.ErrInvalid) || !strings.Contains(err.Error(), "epmatchhdr") {
		t.Fatalf("rank %d: Init = %v, want ErrInvalid naming epmatchhdr", j.Rank(), err)
	}
}

// joinJob joins the job of a worker rank, for tests that call Init with
// their own options; it is finalised when t ends.
func joinJob(t *testing.T) (job.Job, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	j, err := job.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Finalize() })
	return j, ctx
}
