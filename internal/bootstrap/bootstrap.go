// Package bootstrap gives the rest of weft what a parallel job needs before
// any fabric is up: its rank and size, which ranks share a node, and a
// put/fence/get key-value exchange used to trade fabric addresses.
//
// Init detects the launcher from the environment:
//
//   - fabrun (weft's launcher): PMI-1 over an inherited socketpair
//     (PMI_FD, local ranks) or TCP (PMI_PORT + PMI_ID, ssh ranks), with
//     WEFT_PMI_SECRET set. Kind "fabrun".
//   - MPICH Hydra (mpiexec.hydra): PMI-1 over PMI_FD (or PMI_PORT + PMI_ID
//     with -pmi-port). Kind "hydra".
//   - Slurm (srun --mpi=pmi2): PMI-2 over PMI_FD (SLURM_MPI_TYPE=pmi2 or
//     PMI_JOBID set). Kind "slurm".
//   - nothing: a singleton job of size 1 with an in-process key-value store.
//     Kind "singleton".
//
// WEFT_PMI=pmi1|pmi2|singleton overrides the detection.
//
// Values are arbitrary bytes (libfabric endpoint names are binary). They are
// encoded with base64url (no padding), which survives every PMI
// implementation, and split across several keys when longer than the
// launcher's vallen_max: key holds "N." followed by the first part and
// key#1 ... key#N-1 hold the rest. Keys themselves must be short ASCII
// names made of letters, digits and "_-.:/" (callers put their rank in
// the key, e.g. "ep.3").
//
// Node-local rank and size come from WEFT_LOCAL_RANK/WEFT_LOCAL_SIZE
// (fabrun), MPI_LOCALRANKID/MPI_LOCALNRANKS (Hydra), the launcher's
// PMI_process_mapping, or, as a last resort, an exchange of host names
// during Init (collective; every rank takes the same path).
//
// A Bootstrap is safe for concurrent use; requests to the launcher are
// serialised.
//
// With WEFT_SIGUSR1_STACKS=1 in the environment (fabrun sets it for its
// local ranks), Init installs a SIGUSR1 handler that writes every
// goroutine's stack to stderr, headed by the rank, and lets the program
// carry on: fabrun forwards its own SIGUSR1 this way to inspect a hung job.
package bootstrap

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/weft-hpc/weft/errs"
	"github.com/weft-hpc/weft/internal/pmi"
	"github.com/weft-hpc/weft/internal/wlog"
)

var log = wlog.Named("bootstrap")

// Bootstrap is a job's launcher connection. See the package documentation.
type Bootstrap interface {
	// Rank is this process's rank in [0, Size).
	Rank() int
	// Size is the number of ranks in the job.
	Size() int
	// LocalRank is this process's index among the ranks on its node.
	LocalRank() int
	// LocalSize is the number of ranks on this node.
	LocalSize() int
	// Put publishes value (any bytes) under key. Keys are global: callers
	// put their rank in the key. A rank may put a key only once (ErrBadKey);
	// two ranks putting the same key is undefined.
	Put(key string, value []byte) error
	// Fence is collective over all ranks: every Put made before it by any
	// rank is visible to Get after it.
	Fence(ctx context.Context) error
	// Get returns the value put under key by any rank before the last Fence.
	// It returns an error wrapping ErrNotFound when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Abort asks the launcher to kill the whole job with exit status code,
	// printing msg. It returns after the request is sent; the caller should
	// then exit. In a singleton it only logs.
	Abort(code int, msg string) error
	// Finalize ends the launcher session. Later calls fail with ErrFinalized.
	Finalize() error
	// Kind names the launcher: "fabrun", "hydra", "slurm" or "singleton".
	Kind() string
}

// Errors returned by Bootstrap methods (wrapped; test with errors.Is).
// ErrFinalized and ErrBadKey are the shared errs.ErrClosed and
// errs.ErrInvalid.
var (
	ErrNotFound  = pmi.ErrNotFound
	ErrFinalized = errs.ErrClosed
	ErrBadKey    = errs.ErrInvalid
)

var errFinalized = fmt.Errorf("bootstrap: finalized: %w", ErrFinalized)

// backend is one launcher protocol.
type backend interface {
	put(ctx context.Context, key, val string) error
	fence(ctx context.Context) error
	get(ctx context.Context, key string) (string, error)
	jobInfo(ctx context.Context, key string) (string, error)
	abort(ctx context.Context, code int, msg string) error
	finalize(ctx context.Context) error
	maxes() (key, val int)
}

// Init connects to the launcher named by the environment (see the package
// documentation) and returns this process's Bootstrap. ctx bounds the
// connection and initial exchange.
func Init(ctx context.Context) (Bootstrap, error) {
	return initFrom(ctx, os.Getenv)
}

func initFrom(ctx context.Context, getenv func(string) string) (Bootstrap, error) {
	setupStacks(getenv) // first: a rank that hangs in Init can be inspected too
	mode := strings.ToLower(getenv("WEFT_PMI"))
	if mode == "" {
		switch {
		case getenv("PMI_FD") != "" && (getenv("SLURM_MPI_TYPE") == "pmi2" || getenv("PMI_JOBID") != ""):
			mode = "pmi2"
		case getenv("PMI_FD") != "" || getenv("PMI_PORT") != "":
			mode = "pmi1"
		default:
			mode = "singleton"
		}
	}
	b := &boot{cache: map[string][]byte{}, mine: map[string]bool{}}
	switch mode {
	case "singleton":
		if n, _ := strconv.Atoi(getenv("SLURM_STEP_NUM_TASKS")); n > 1 && getenv("WEFT_PMI") == "" {
			log.Warn("started by srun without a PMI plugin: every task runs as a singleton job; use srun --mpi=pmi2 (or fabrun)", "tasks", n)
		}
		b.kind, b.size, b.b = "singleton", 1, &single{kv: map[string]string{}}
	case "pmi1":
		e, err := pmi.Env1FromEnviron(getenv)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: PMI-1: %w", err)
		}
		cl, err := pmi.Dial1(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: PMI-1: %w", err)
		}
		b.kind = "hydra"
		if e.Secret != "" {
			b.kind = "fabrun"
		}
		b.rank, b.size, b.b, b.app = cl.Rank(), cl.Size(), pmi1{cl}, cl.AppNum()
	case "pmi2":
		e, err := pmi.Env2FromEnviron(getenv)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: PMI-2: %w", err)
		}
		cl, err := pmi.Dial2(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: PMI-2: %w", err)
		}
		b.kind, b.rank, b.size, b.b, b.app = "slurm", cl.Rank(), cl.Size(), pmi2{cl}, cl.AppNum()
	default:
		return nil, fmt.Errorf("bootstrap: WEFT_PMI=%q: want pmi1, pmi2 or singleton", mode)
	}
	// fabrun names the app of an MPMD job in the environment under every
	// launcher (Slurm's steps run its programs through env); otherwise
	// PMI's appnum stands (Hydra's MPMD jobs).
	if v := getenv("WEFT_APPNUM"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			b.b.finalize(ctx)
			return nil, fmt.Errorf("bootstrap: WEFT_APPNUM=%q is not an application number", v)
		}
		b.app = n
	}
	if err := b.findLocal(ctx, getenv); err != nil {
		b.b.finalize(ctx)
		return nil, err
	}
	log.Debug("bootstrap up", "kind", b.kind, "rank", b.rank, "size", b.size, "local_rank", b.lrank, "local_size", b.lsize)
	return b, nil
}

type boot struct {
	mu           sync.Mutex
	kind         string
	rank, size   int
	lrank, lsize int
	app          int // application number (MPMD)
	b            backend
	cache        map[string][]byte
	mine         map[string]bool // keys this process has put
	done         bool
}

func (b *boot) Rank() int      { return b.rank }
func (b *boot) Size() int      { return b.size }
func (b *boot) LocalRank() int { return b.lrank }
func (b *boot) LocalSize() int { return b.lsize }
func (b *boot) Kind() string   { return b.kind }

// AppNum is the index of this rank's program in an MPMD launch (0
// otherwise).
func (b *boot) AppNum() int { return b.app }

// findLocal fills lrank and lsize.
func (b *boot) findLocal(ctx context.Context, getenv func(string) string) error {
	if b.size == 1 {
		b.lrank, b.lsize = 0, 1
		return nil
	}
	for _, pair := range [][2]string{{"WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE"}, {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"}} {
		r, err1 := strconv.Atoi(getenv(pair[0]))
		n, err2 := strconv.Atoi(getenv(pair[1]))
		if err1 == nil && err2 == nil && n > 0 && r >= 0 && r < n {
			b.lrank, b.lsize = r, n
			return nil
		}
	}
	if m, err := b.b.jobInfo(ctx, "PMI_process_mapping"); err == nil {
		if lr, ls, err := LocalFromMapping(m, b.rank, b.size); err == nil {
			b.lrank, b.lsize = lr, ls
			return nil
		} else {
			log.Debug("unusable PMI_process_mapping", "value", m, "err", err)
		}
	}
	// Last resort: exchange host names.
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("bootstrap: hostname: %w", err)
	}
	key := "weft.host." + strconv.Itoa(b.rank)
	if err := b.Put(key, []byte(host)); err != nil {
		return err
	}
	if err := b.Fence(ctx); err != nil {
		return err
	}
	for r := range b.size {
		h, err := b.Get(ctx, "weft.host."+strconv.Itoa(r))
		if err != nil {
			return err
		}
		if string(h) == host {
			if r < b.rank {
				b.lrank++
			}
			b.lsize++
		}
	}
	return nil
}

// LocalFromMapping computes rank's node-local rank and the node's rank count
// from an MPICH PMI_process_mapping value such as "(vector,(0,2,4))"
// (blocks of node, node count, ranks per node, assigned in rank order).
func LocalFromMapping(mapping string, rank, size int) (localRank, localSize int, err error) {
	s := strings.TrimSpace(mapping)
	if !strings.HasPrefix(s, "(vector,") || !strings.HasSuffix(s, ")") {
		return 0, 0, fmt.Errorf("bootstrap: process mapping %q: not (vector,...)", mapping)
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "(vector,"), ")")
	next := 0 // first rank of the next block
	for s != "" {
		s = strings.TrimPrefix(strings.TrimSpace(s), ",")
		if !strings.HasPrefix(s, "(") {
			return 0, 0, fmt.Errorf("bootstrap: process mapping %q: expected (", mapping)
		}
		end := strings.IndexByte(s, ')')
		if end < 0 {
			return 0, 0, fmt.Errorf("bootstrap: process mapping %q: unterminated block", mapping)
		}
		parts := strings.Split(s[1:end], ",")
		s = s[end+1:]
		if len(parts) != 3 {
			return 0, 0, fmt.Errorf("bootstrap: process mapping %q: block needs 3 numbers", mapping)
		}
		var v [3]int
		for i, p := range parts {
			if v[i], err = strconv.Atoi(strings.TrimSpace(p)); err != nil || v[i] < 0 {
				return 0, 0, fmt.Errorf("bootstrap: process mapping %q: bad number %q", mapping, p)
			}
		}
		nodes, per := v[1], v[2]
		if per == 0 || nodes == 0 {
			continue
		}
		if rank < next+nodes*per {
			return (rank - next) % per, per, nil
		}
		next += nodes * per
	}
	// MPICH repeats the vector cyclically when it has fewer ranks than size.
	if next > 0 && next < size {
		return LocalFromMapping(mapping, rank%next, size)
	}
	return 0, 0, fmt.Errorf("bootstrap: process mapping %q does not cover rank %d", mapping, rank)
}

// validKey reports whether key is usable (see package doc).
func validKey(key string) error {
	if key == "" {
		return fmt.Errorf("bootstrap: %w: empty key", ErrBadKey)
	}
	for _, c := range key {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_-.:/", c)) {
			return fmt.Errorf("bootstrap: %w: %q contains %q (allowed: letters, digits, _-.:/)", ErrBadKey, key, c)
		}
	}
	return nil
}

// chunkKey names the i-th continuation of key.
func chunkKey(key string, i int) string { return key + "#" + strconv.Itoa(i) }

// Put implements Bootstrap.
func (b *boot) Put(key string, value []byte) error {
	if err := validKey(key); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return errFinalized
	}
	if b.mine[key] {
		return fmt.Errorf("bootstrap: %w: %q was already put by this rank", ErrBadKey, key)
	}
	maxKey, maxVal := b.b.maxes()
	enc := base64.RawURLEncoding.EncodeToString(value)
	room := maxVal - 12 // "N." header; N has at most 11 digits
	if room < 16 {
		return fmt.Errorf("bootstrap: launcher's vallen_max %d is too small", maxVal)
	}
	n := max(1, (len(enc)+room-1)/room)
	if len(chunkKey(key, n)) > maxKey || n == 1 && len(key) > maxKey {
		return fmt.Errorf("bootstrap: %w: %q (with %d parts) exceeds the launcher's keylen_max %d", ErrBadKey, key, n, maxKey)
	}
	ctx := context.Background()
	for i := range n {
		part := enc[min(i*room, len(enc)):min((i+1)*room, len(enc))]
		k, v := key, part
		if i == 0 {
			v = strconv.Itoa(n) + "." + part
		} else {
			k = chunkKey(key, i)
		}
		if err := b.b.put(ctx, k, v); err != nil {
			return fmt.Errorf("bootstrap: put %q: %w", k, err)
		}
	}
	b.mine[key] = true
	return nil
}

// Fence implements Bootstrap.
func (b *boot) Fence(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return errFinalized
	}
	if err := b.b.fence(ctx); err != nil {
		return fmt.Errorf("bootstrap: fence: %w", err)
	}
	return nil
}

// Get implements Bootstrap.
func (b *boot) Get(ctx context.Context, key string) ([]byte, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return nil, errFinalized
	}
	if v, ok := b.cache[key]; ok {
		return append([]byte(nil), v...), nil
	}
	first, err := b.b.get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: get %q: %w", key, err)
	}
	head, rest, ok := strings.Cut(first, ".")
	n, err := strconv.Atoi(head)
	if !ok || err != nil || n < 1 {
		return nil, fmt.Errorf("bootstrap: get %q: value was not put by weft's bootstrap (%.20q)", key, first)
	}
	var sb strings.Builder
	sb.WriteString(rest)
	for i := 1; i < n; i++ {
		part, err := b.b.get(ctx, chunkKey(key, i))
		if err != nil {
			return nil, fmt.Errorf("bootstrap: get %q part %d of %d: %w", key, i, n, err)
		}
		sb.WriteString(part)
	}
	v, err := base64.RawURLEncoding.DecodeString(sb.String())
	if err != nil {
		return nil, fmt.Errorf("bootstrap: get %q: corrupt value: %w", key, err)
	}
	b.cache[key] = v
	return append([]byte(nil), v...), nil
}

// Abort implements Bootstrap.
func (b *boot) Abort(code int, msg string) error {
	fmt.Fprintf(os.Stderr, "weft: rank %d aborting job with status %d: %s\n", b.rank, code, msg)
	b.mu.Lock()
	defer b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	if err := b.b.abort(ctx, code, msg); err != nil {
		return fmt.Errorf("bootstrap: abort: %w", err)
	}
	return nil
}

// Finalize implements Bootstrap.
func (b *boot) Finalize() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return nil
	}
	b.done = true
	ctx, cancel := context.WithTimeout(context.Background(), finalizeTimeout)
	defer cancel()
	if err := b.b.finalize(ctx); err != nil {
		return fmt.Errorf("bootstrap: finalize: %w", err)
	}
	return nil
}
