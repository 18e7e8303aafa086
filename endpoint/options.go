package endpoint

import (
	"fmt"
	"time"

	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/internal/settings"
	"github.com/weft-hpc/weft/internal/wait"
	"github.com/weft-hpc/weft/job"
)

// Environment variables read by Init and CreateEndpoints (options override
// them). They are entries of weft's settings registry (README.md,
// "Settings"): a bad value makes Init fail with ErrInvalid.
const (
	// EnvEagerLimit is the largest message, in bytes, sent eagerly; larger
	// messages use the rendezvous protocol (the receiver reads the sender's
	// buffer). Every rank must use the same value. Default 16384.
	EnvEagerLimit = "WEFT_EAGER_LIMIT"
	// EnvCQSize is the completion queue depth of every endpoint. Default 1024.
	EnvCQSize = "WEFT_CQ_SIZE"
	// EnvTimeout bounds internal waits that take no context (a queued send
	// the provider keeps refusing fails after it; waits inside Free and
	// cancelled receives); a Go duration. Default 60s.
	EnvTimeout = "WEFT_ENDPOINT_TIMEOUT"
	// EnvShared makes CreateEndpoints use one shared, locked fabric endpoint
	// for all handles of a process ("1", "true"). Default private.
	EnvShared = "WEFT_ENDPOINT_SHARED"
	// EnvSharedEndpoints is the number of locked endpoints a shared
	// CreateEndpoints call spreads its handles over (see SharedEndpoints).
	// Default 1.
	EnvSharedEndpoints = "WEFT_ENDPOINT_SHARED_EPS"
	// EnvNodeTransport chooses how ranks of one node exchange messages:
	// "native" (the default: weft's shared-memory rings, and single-copy
	// rendezvous) or "fabric" (libfabric, as between nodes).
	EnvNodeTransport = "WEFT_NODE_TRANSPORT"
)

// tune is WEFT_TUNE, parsed once (a bad value leaves the defaults here and
// fails Init through envConfig).
var tune, _ = settings.Tune()

// spinFree is the number of polls (about 5 µs) a wait makes before it
// also drives the process's other endpoints and watches for exited peers.
const spinFree = 256

// spinYield: every spinYield-th poll of a wait checks the context and,
// after yieldFrom polls, yields (WEFT_TUNE's epspin, process-wide like
// GOMAXPROCS).
var spinYield = int(tune.EPSpin)

// yieldFrom is the number of polls (about 40 µs on the 2-vCPU VM) an
// uncrowded wait makes before it starts yielding: a yield between the
// polls of a shorter wait, a 64 KiB message's rendezvous round trip for
// one, cost more than it gave (64 KiB–256 KiB half round trips 1.2–1.9×
// Open MPI's when the yields started at spinFree, 1.05–1.15× from
// yieldFrom; docs/perf/endpoint.md).
const yieldFrom = 2048

// waitPolicy is the endpoint waits' wait.Policy: spin for spinFree polls,
// then also drive the process's other endpoints and watch for exited
// peers, from yieldFrom polls on yield every spinYield-th poll, every
// eposyield-th of those to other processes (sched_yield); never nap
// (docs/perf/endpoint.md).
var waitPolicy = wait.Policy{Name: "endpoint", SpinPolls: spinFree, YieldPolls: yieldFrom, YieldEvery: spinYield, OSYieldEvery: int(tune.EPOSYield)}

const (
	defaultEagerLimit = 16 << 10
	defaultCQSize     = 1024
	defaultTimeout    = 60 * time.Second
	rdvHeaderSize     = 32
)

type config struct {
	eagerLimit int
	cqSize     int
	timeout    time.Duration
	shared     bool
	sharedEPs  int // locked endpoints the shared handles are spread over (≥ 1)
	provider   string
	job        job.Job
	extraCaps  fabric.Caps
	order      fabric.Order
	native     bool   // node transport for peers on this node
	stats      bool   // count what each endpoint sends (World.Stats)
	statsDir   string // and write it here at Close
}

// Option changes how Init or CreateEndpoints set an endpoint up.
type Option func(*config) error

// WithEagerLimit sets the eager/rendezvous threshold in bytes (see EnvEagerLimit).
func WithEagerLimit(n int) Option {
	return func(c *config) error {
		if n < rdvHeaderSize || n > 1<<30 {
			return fmt.Errorf("endpoint: eager limit %d outside %d..%d: %w", n, rdvHeaderSize, 1<<30, ErrInvalid)
		}
		c.eagerLimit = n
		return nil
	}
}

// WithCQSize sets the completion queue depth (see EnvCQSize).
func WithCQSize(n int) Option {
	return func(c *config) error {
		if n < 16 {
			return fmt.Errorf("endpoint: CQ size %d below 16: %w", n, ErrInvalid)
		}
		c.cqSize = n
		return nil
	}
}

// WithTimeout bounds internal waits that take no context (see EnvTimeout).
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("endpoint: timeout %v not positive: %w", d, ErrInvalid)
		}
		c.timeout = d
		return nil
	}
}

// Shared makes CreateEndpoints put all of a process's handles behind one
// fabric endpoint guarded by a mutex (FI_THREAD_SAFE), the baseline the
// private design is measured against. Shared(false) forces private endpoints.
func Shared(on bool) Option { return func(c *config) error { c.shared = on; return nil } }

// SharedEndpoints spreads the handles of a Shared CreateEndpoints call over
// k locked endpoints instead of one (see EnvSharedEndpoints): handle i of n
// goes to endpoint i*k/n, so with n = 2m and k = 2 the first m handles share
// one endpoint and the last m another (as MPI threads share a sending and a
// receiving process). k is capped at n; it has no effect on private
// endpoints.
func SharedEndpoints(k int) Option {
	return func(c *config) error {
		if k < 1 || k > MaxSharedHandles {
			return fmt.Errorf("endpoint: %d shared endpoints outside 1..%d: %w", k, MaxSharedHandles, ErrInvalid)
		}
		c.sharedEPs = k
		return nil
	}
}

// WithNodeTransport chooses how the endpoints created with it talk to
// ranks of the same node (see EnvNodeTransport): true for weft's node
// transport (shared-memory rings, single-copy rendezvous), false for
// libfabric. Two endpoints use the node transport only when both have it
// on; ranks on other nodes always use libfabric.
func WithNodeTransport(native bool) Option {
	return func(c *config) error { c.native = native; return nil }
}

// WithProvider asks for a libfabric provider by name ("shm", "tcp;ofi_rxm",
// ...); WEFT_PROVIDER is honoured by fabric.Select when this is not given.
func WithProvider(name string) Option { return func(c *config) error { c.provider = name; return nil } }

// WithStats makes Init's world count the point-to-point traffic its
// endpoints send, for World.Stats (off by default: counting costs about
// 10 ns a message).
func WithStats() Option { return func(c *config) error { c.stats = true; return nil } }

// WithStatsDir counts as WithStats does and makes World.Close write the
// process's traffic (World.Stats) into dir as weft-stats.RANK.json, for
// fabrun stats (see EnvStats); "" writes nothing (and leaves counting as
// it was).
func WithStatsDir(dir string) Option {
	return func(c *config) error {
		c.statsDir = dir
		c.stats = c.stats || dir != ""
		return nil
	}
}

// WithJob makes Init use an already initialised job (job.Init) instead of
// calling job.Init itself. World.Close then leaves it to the caller to
// finalise.
func WithJob(j job.Job) Option {
	return func(c *config) error { c.job = j; return nil }
}

// WithCaps adds libfabric capabilities to the ones Init asks for (tagged
// messages and RMA read/write), for layers such as onesided/ that open their
// own endpoints in the world's domain.
func WithCaps(caps fabric.Caps) Option {
	return func(c *config) error { c.extraCaps |= caps; return nil }
}

// WithOrder adds message-ordering bits to the ones Init asks for (FI_ORDER_SAS).
func WithOrder(o fabric.Order) Option { return func(c *config) error { c.order |= o; return nil } }

func envConfig() (config, error) {
	c := config{eagerLimit: defaultEagerLimit, cqSize: defaultCQSize, timeout: defaultTimeout, sharedEPs: 1}
	// Every library setting and WEFT_TUNE, not only endpoint's: Init is
	// where a program starts using weft, so a bad value anywhere fails here.
	if err := settings.Check(""); err != nil {
		return c, fmt.Errorf("endpoint: %w: %w", err, ErrInvalid)
	}
	n, _, _ := settings.IntValue(EnvEagerLimit)
	c.eagerLimit = int(n)
	n, _, _ = settings.IntValue(EnvCQSize)
	c.cqSize = int(n)
	c.timeout, _, _ = settings.DurationValue(EnvTimeout)
	n, _, _ = settings.IntValue(EnvSharedEndpoints)
	c.sharedEPs = int(n)
	if c.sharedEPs > MaxSharedHandles {
		return c, fmt.Errorf("endpoint: %s=%d above %d: %w", EnvSharedEndpoints, c.sharedEPs, MaxSharedHandles, ErrInvalid)
	}
	mode, _, _ := settings.Str(EnvShared)
	c.shared = mode == "shared"
	mode, _, _ = settings.Str(EnvNodeTransport)
	c.native = mode != "fabric"
	c.statsDir, _, _ = settings.Str(EnvStats)
	c.stats = c.statsDir != ""
	return c, nil
}

func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}
