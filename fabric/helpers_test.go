package fabric

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

func TestMain(m *testing.M) {
	if role := os.Getenv("WEFT_FABRIC_CHILD"); role != "" {
		os.Exit(childMain(role))
	}
	if os.Getenv(defaultsChildEnv) != "" {
		os.Exit(defaultsChild())
	}
	if mode := os.Getenv("WEFT_FABRIC_SIGCHILD"); mode != "" {
		os.Exit(sigChild(mode))
	}
	if mode := os.Getenv("WEFT_FABRIC_DLCHILD"); mode != "" {
		os.Exit(dlChild(mode))
	}
	code := m.Run()
	if code == 0 {
		if l := LiveObjects(); len(l) != 0 {
			fmt.Fprintf(os.Stderr, "leaked libfabric objects: %v\n", l)
			code = 1
		}
	}
	os.Exit(code)
}

// skipNoProvider skips when the provider is absent on this machine (feature
// "provider:<prov>" of internal/testenv, which fails instead when
// WEFT_REQUIRE or WEFT_REQUIRE_PROVIDERS claims it) and fails on any other
// error.
func skipNoProvider(t testing.TB, prov string, err error) {
	t.Helper()
	if errors.Is(err, ErrNoProvider) {
		testenv.Skip(t, "provider:"+prov, "libfabric provider %s not available here: %v", prov, err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

type side struct {
	cq   *CQ
	av   *AV
	ep   *Endpoint
	addr []Addr // addr[0] = side a, addr[1] = side b
}

type pair struct {
	info *Info
	fab  *Fabric
	dom  *Domain
	a, b side
}

// newPair opens two endpoints in one domain (opened with opts), each with
// its own CQ and AV, both AVs holding [a, b] in that order.
func newPair(t testing.TB, h Hints, opts ...DomainOption) *pair {
	t.Helper()
	infos, err := GetInfo(&h)
	skipNoProvider(t, h.Provider, err)
	p := &pair{info: infos[0]}
	if p.fab, err = OpenFabric(p.info); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.fab.Close(); err != nil {
			t.Errorf("fabric close: %v", err)
		}
	})
	if p.dom, err = p.fab.OpenDomain(p.info, opts...); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*side{&p.a, &p.b} {
		if s.cq, err = p.dom.OpenCQ(128); err != nil {
			t.Fatal(err)
		}
		if s.av, err = p.dom.OpenAV(4); err != nil {
			t.Fatal(err)
		}
		if s.ep, err = p.dom.OpenEndpoint(p.info, s.cq, s.av); err != nil {
			t.Fatal(err)
		}
	}
	na, err := p.a.ep.Name()
	if err != nil {
		t.Fatal(err)
	}
	nb, err := p.b.ep.Name()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*side{&p.a, &p.b} {
		if s.addr, err = s.av.Insert(na, nb); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// waitComp polls cqs (driving progress on all of them) until cq yields one
// completion or error.
func waitComp(t testing.TB, cq *CQ, others ...*CQ) (Completion, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out [1]Completion
	for {
		if q := backlog[cq]; len(q) > 0 {
			backlog[cq] = q[1:]
			return q[0].c, q[0].err
		}
		n, err := cq.Read(out[:])
		if n > 0 || err != nil {
			return out[0], err
		}
		for _, o := range others {
			drain(o)
		}
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for a completion")
		}
	}
}

func mustComp(t testing.TB, cq *CQ, others ...*CQ) Completion {
	t.Helper()
	c, err := waitComp(t, cq, others...)
	if err != nil {
		t.Fatalf("completion error: %v", err)
	}
	return c
}

// retry repeats op while it reports ErrAgain, driving progress.
func retry(t testing.TB, op func() error, cqs ...*CQ) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrAgain) || time.Now().After(deadline) {
			t.Fatalf("operation failed: %v", err)
		}
		for _, c := range cqs {
			drain(c)
		}
	}
}

type result struct {
	c   Completion
	err error
}

// backlog keeps completions read while driving progress on a CQ that the
// test was not waiting on (tests in this package do not run in parallel).
var backlog = map[*CQ][]result{}

func drain(cq *CQ) {
	var buf [8]Completion
	n, err := cq.Read(buf[:])
	for _, c := range buf[:n] {
		backlog[cq] = append(backlog[cq], result{c: c})
	}
	if err != nil {
		backlog[cq] = append(backlog[cq], result{err: err})
	}
}

// pinned pins b (Go memory handed to libfabric for longer than one call
// must be pinned, per the cgo rules) until the test ends.
func pinned(t testing.TB, b []byte) []byte {
	var p runtime.Pinner
	p.Pin(&b[0])
	t.Cleanup(p.Unpin)
	return b
}

// waitFor drives progress on cqs until cond holds (10 s at most).
func waitFor(t testing.TB, cond func() bool, cqs ...*CQ) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for remote memory to change")
		}
		for _, c := range cqs {
			drain(c)
		}
	}
}

// setMRCache sets the MR cache size of one domain (WEFT_TUNE's mrcache is
// the process-wide default), before the test registers anything.
func setMRCache(d *Domain, n int) {
	d.cache.mu.Lock()
	d.cache.max = n
	d.cache.mu.Unlock()
}
