package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/pmi"
	"github.com/weft-hpc/weft/internal/testenv"
)

// testValue returns deterministic binary bytes of length n for rank r,
// covering every byte value.
func testValue(r, n int) []byte {
	v := make([]byte, n)
	rng := rand.New(rand.NewPCG(uint64(r), uint64(n)))
	for i := range v {
		if i < 256 {
			v[i] = byte(i + r)
		} else {
			v[i] = byte(rng.Uint32())
		}
	}
	return v
}

var testSizes = []int{0, 1, 2, 3, 100, 766, 767, 768, 769, 2000, 10000}

// exercise runs the put/fence/get checks every rank of a job performs.
func exercise(ctx context.Context, b Bootstrap) error {
	for _, n := range testSizes {
		if err := b.Put(fmt.Sprintf("v.%d.%d", b.Rank(), n), testValue(b.Rank(), n)); err != nil {
			return err
		}
	}
	if err := b.Put(fmt.Sprintf("v.%d.%d", b.Rank(), 0), nil); err == nil {
		return errors.New("duplicate put accepted")
	}
	if err := b.Put("bad key", nil); !errors.Is(err, ErrBadKey) {
		return fmt.Errorf("bad key: %v", err)
	}
	if err := b.Put(strings.Repeat("k", 80), nil); !errors.Is(err, ErrBadKey) {
		return fmt.Errorf("long key: %v", err)
	}
	if err := b.Fence(ctx); err != nil {
		return err
	}
	for r := range b.Size() {
		for _, n := range testSizes {
			got, err := b.Get(ctx, fmt.Sprintf("v.%d.%d", r, n))
			if err != nil {
				return err
			}
			if !bytes.Equal(got, testValue(r, n)) {
				return fmt.Errorf("rank %d: value %d from rank %d differs", b.Rank(), n, r)
			}
		}
	}
	if _, err := b.Get(ctx, "never.put"); !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("missing key: %v", err)
	}
	if err := b.Fence(ctx); err != nil {
		return err
	}
	if err := b.Finalize(); err != nil {
		return err
	}
	if err := b.Fence(ctx); !errors.Is(err, ErrFinalized) {
		return fmt.Errorf("fence after finalize: %v", err)
	}
	return nil
}

func envFunc(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// runServerJob runs n ranks as goroutines against weft's PMI-1 server.
func runServerJob(t *testing.T, n int, cfg pmi.ServerConfig, extra func(rank int) map[string]string, check func(b Bootstrap) error) {
	t.Helper()
	secret, _ := pmi.NewSecret()
	cfg.Size, cfg.Secret = n, secret
	srv, err := pmi.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go srv.Serve(ctx, l)
	defer srv.Close()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := map[string]string{"PMI_PORT": l.Addr().String(), "PMI_ID": strconv.Itoa(r), "WEFT_PMI_SECRET": secret}
			if extra != nil {
				for k, v := range extra(r) {
					env[k] = v
				}
			}
			b, err := initFrom(ctx, envFunc(env))
			if err != nil {
				errs[r] = err
				return
			}
			if b.Kind() != "fabrun" || b.Rank() != r || b.Size() != n {
				errs[r] = fmt.Errorf("kind %s rank %d size %d", b.Kind(), b.Rank(), b.Size())
				return
			}
			if check != nil {
				if errs[r] = check(b); errs[r] != nil {
					return
				}
			}
			errs[r] = exercise(ctx, b)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestFabrunPMI1(t *testing.T) {
	runServerJob(t, 4, pmi.ServerConfig{}, func(r int) map[string]string {
		return map[string]string{"WEFT_LOCAL_RANK": strconv.Itoa(r % 2), "WEFT_LOCAL_SIZE": "2"}
	}, func(b Bootstrap) error {
		if b.LocalRank() != b.Rank()%2 || b.LocalSize() != 2 {
			return fmt.Errorf("local %d/%d", b.LocalRank(), b.LocalSize())
		}
		return nil
	})
}

func TestSmallValueLimit(t *testing.T) {
	// A server with a small vallen_max forces every value to be split.
	runServerJob(t, 2, pmi.ServerConfig{MaxValue: 64, ProcessMapping: "(vector,(0,2,1))"}, nil, func(b Bootstrap) error {
		if b.LocalRank() != 0 || b.LocalSize() != 1 {
			return fmt.Errorf("local from mapping %d/%d", b.LocalRank(), b.LocalSize())
		}
		return nil
	})
}

func TestLocalByHostExchange(t *testing.T) {
	runServerJob(t, 3, pmi.ServerConfig{}, nil, func(b Bootstrap) error {
		if b.LocalRank() != b.Rank() || b.LocalSize() != 3 {
			return fmt.Errorf("local by host names %d/%d", b.LocalRank(), b.LocalSize())
		}
		return nil
	})
}

func TestSingleton(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := initFrom(ctx, envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	if b.Kind() != "singleton" || b.Rank() != 0 || b.Size() != 1 || b.LocalRank() != 0 || b.LocalSize() != 1 {
		t.Fatalf("singleton: %s %d/%d %d/%d", b.Kind(), b.Rank(), b.Size(), b.LocalRank(), b.LocalSize())
	}
	if err := exercise(ctx, b); err != nil {
		t.Fatal(err)
	}
}

func TestInitErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, env := range []map[string]string{
		{"WEFT_PMI": "pmi3"},
		{"PMI_PORT": "127.0.0.1:1", "PMI_ID": "0"}, // nothing listens on port 1
		{"PMI_PORT": "nonsense", "PMI_ID": "0"},
		{"PMI_FD": "999", "PMI_RANK": "0", "PMI_SIZE": "2"},
		{"PMI_FD": "0", "PMI_JOBID": "1.0"}, // stdin is not a socket
	} {
		if b, err := initFrom(ctx, envFunc(env)); err == nil {
			t.Errorf("env %v: Init succeeded (%s)", env, b.Kind())
		} else {
			t.Logf("env %v: %v", env, err)
		}
	}
}

func TestLocalFromMapping(t *testing.T) {
	cases := []struct {
		m            string
		rank, size   int
		lrank, lsize int
		bad          bool
	}{
		{m: "(vector,(0,1,4))", rank: 3, size: 4, lrank: 3, lsize: 4},
		{m: "(vector,(0,2,2))", rank: 2, size: 4, lrank: 0, lsize: 2},
		{m: "(vector,(0,2,2))", rank: 3, size: 4, lrank: 1, lsize: 2},
		{m: "(vector,(0,1,3),(1,1,1))", rank: 3, size: 4, lrank: 0, lsize: 1},
		{m: "(vector,(0,2,1))", rank: 3, size: 4, lrank: 0, lsize: 1}, // cyclic
		{m: "(vector,(0,1,2))", rank: 1, size: 2, lrank: 1, lsize: 2},
		{m: "", bad: true},
		{m: "(vector,(0,1))", bad: true},
		{m: "(vector,(0,1,x))", bad: true},
		{m: "(vector,(0,1,2)", bad: true},
		{m: "(vector,)", rank: 0, size: 1, bad: true},
	}
	for _, c := range cases {
		lr, ls, err := LocalFromMapping(c.m, c.rank, c.size)
		if c.bad != (err != nil) || !c.bad && (lr != c.lrank || ls != c.lsize) {
			t.Errorf("LocalFromMapping(%q, %d, %d) = %d, %d, %v", c.m, c.rank, c.size, lr, ls, err)
		}
	}
}

// TestLauncherWorker is the body run by every rank under a real launcher
// (TestHydra here; srun in test/launchers): all ranks on this host, kind as
// WEFT_EXPECT_KIND says. Outside such a rank it has nothing to do: the
// launching tests check its result (every rank's "ok" line).
func TestLauncherWorker(t *testing.T) {
	if os.Getenv("WEFT_BOOTSTRAP_WORKER") != "1" {
		return // not a rank: TestHydra and test/launchers run this body
	}
	want := os.Getenv("WEFT_EXPECT_KIND")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Kind() != want || b.Size() != 3 || b.LocalSize() != 3 || b.LocalRank() != b.Rank() {
		t.Fatalf("kind %s rank %d size %d local %d/%d", b.Kind(), b.Rank(), b.Size(), b.LocalRank(), b.LocalSize())
	}
	if err := exercise(ctx, b); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s rank %d ok\n", want, b.Rank())
}

// TestHydra runs TestLauncherWorker as 3 ranks under MPICH's mpiexec.hydra, with
// PMI_FD and with -pmi-port.
func TestHydra(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testenv.Skip(t, "hydra", "mpiexec.hydra not installed (Debian package mpich): %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range [][]string{nil, {"-pmi-port"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		args := append([]string{"-launcher", "fork"}, mode...)
		args = append(args, "-n", "3", exe, "-test.run", "^TestLauncherWorker$", "-test.count=1", "-test.v")
		cmd := exec.CommandContext(ctx, hydra, args...)
		cmd.Env = append(os.Environ(), "WEFT_BOOTSTRAP_WORKER=1", "WEFT_EXPECT_KIND=hydra")
		cmd.WaitDelay = 2 * time.Second
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("mpiexec.hydra %v: %v\n%s", mode, err, out)
		}
		for r := range 3 {
			if !bytes.Contains(out, []byte(fmt.Sprintf("hydra rank %d ok", r))) {
				t.Errorf("mpiexec.hydra %v: rank %d did not finish:\n%s", mode, r, out)
			}
		}
	}
}

// TestConcurrentUse hammers one rank's Bootstrap from many goroutines: the
// requests share one PMI connection and must stay in step.
func TestConcurrentUse(t *testing.T) {
	runServerJob(t, 2, pmi.ServerConfig{}, func(r int) map[string]string {
		return map[string]string{"WEFT_LOCAL_RANK": strconv.Itoa(r), "WEFT_LOCAL_SIZE": "2"}
	}, func(b Bootstrap) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := b.Put(fmt.Sprintf("c.%d.%d", b.Rank(), g), testValue(g, 100*g)); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		if err := b.Fence(ctx); err != nil {
			return err
		}
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range b.Size() {
					v, err := b.Get(ctx, fmt.Sprintf("c.%d.%d", r, g))
					if err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(v, testValue(g, 100*g)) {
						errs <- fmt.Errorf("c.%d.%d differs", r, g)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	})
}
