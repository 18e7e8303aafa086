package pmi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

func TestParseLine(t *testing.T) {
	cases := []struct {
		in      string
		cmd     string
		kv      map[string]string
		wantErr bool
	}{
		{in: "cmd=init pmi_version=1 pmi_subversion=1\n", cmd: "init", kv: map[string]string{"pmi_version": "1", "pmi_subversion": "1"}},
		{in: "cmd=get_result rc=0 msg=success value=a=b\n", cmd: "get_result", kv: map[string]string{"rc": "0", "value": "a=b"}},
		{in: "cmd=abort exitcode=3 error_msg=it broke badly\n", cmd: "abort", kv: map[string]string{"error_msg": "it broke badly"}},
		{in: "cmd=put key= value=x", cmd: "put", kv: map[string]string{"key": "", "value": "x"}},
		{in: "", wantErr: true},
		{in: "   \n", wantErr: true},
		{in: "init pmi_version=1\n", wantErr: true},
		{in: "key=1 cmd=init\n", wantErr: true},
		{in: "cmd= x=1\n", wantErr: true},
		{in: "cmd=x =1\n", wantErr: true},
	}
	for _, c := range cases {
		m, err := ParseLine(c.in)
		if c.wantErr {
			if err == nil || !errors.Is(err, ErrProtocol) {
				t.Errorf("ParseLine(%q) = %+v, %v; want ErrProtocol", c.in, m, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLine(%q): %v", c.in, err)
			continue
		}
		if m.Cmd != c.cmd {
			t.Errorf("ParseLine(%q).Cmd = %q, want %q", c.in, m.Cmd, c.cmd)
		}
		for k, v := range c.kv {
			if got, ok := m.Get(k); !ok || got != v {
				t.Errorf("ParseLine(%q)[%s] = %q,%v want %q", c.in, k, got, ok, v)
			}
		}
		// Round trip through String.
		m2, err := ParseLine(m.String())
		if err != nil || m2.String() != m.String() {
			t.Errorf("round trip of %q: %q, %v", c.in, m2.String(), err)
		}
	}
}

func TestMsg2RoundTrip(t *testing.T) {
	m := NewMsg("kvs-put", "key", "k;1", "value", "a;;b;c=d;")
	wire := FormatMsg2(m)
	n, err := strconv.Atoi(strings.TrimSpace(wire[:6]))
	if err != nil || n != len(wire)-6 {
		t.Fatalf("length prefix %q does not match body of %d bytes", wire[:6], len(wire)-6)
	}
	got, err := readMsg2(bufio.NewReader(strings.NewReader(wire)))
	if v, _ := got.Get("key"); err != nil || v != "k;1" {
		t.Fatalf("escaped ';' in a value: %+v %v", got, err)
	}
	got, err = readMsg2(bufio.NewReader(strings.NewReader(FormatMsg2(m))))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := got.Get("value"); got.Cmd != "kvs-put" || v != "a;;b;c=d;" {
		t.Fatalf("round trip: %+v", got)
	}
	// Slurm-style response without a trailing ';'.
	got, err = ParseMsg2("cmd=kvs-get-response;rc=0;found=TRUE;value=xyz")
	if err != nil || got.Cmd != "kvs-get-response" {
		t.Fatalf("no trailing ;: %+v %v", got, err)
	}
	if v, _ := got.Get("value"); v != "xyz" {
		t.Fatalf("value %q", v)
	}
	for _, bad := range []string{"", "abc", "key=1;cmd=x;", "cmd=;", ";=x;", "cmd"} {
		if m, err := ParseMsg2(bad); !errors.Is(err, ErrProtocol) {
			t.Errorf("ParseMsg2(%q) = %+v, %v; want ErrProtocol", bad, m, err)
		}
	}
	for _, bad := range []string{"", "12", "abcdef", "-1    x", "99999999", "10    short"} {
		if _, err := readMsg2(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("readMsg2(%q) succeeded", bad)
		}
	}
}

// startServer runs a Server on a loopback port and returns its address.
func startServer(t *testing.T, cfg ServerConfig) (*Server, string) {
	t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		s.Close()
	})
	return s, l.Addr().String()
}

func TestServerClientJob(t *testing.T) {
	const n = 4
	secret, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	_, addr := startServer(t, ServerConfig{Size: n, Secret: secret, ProcessMapping: "(vector,(0,1,4))"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for id := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				cl, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: id, Secret: secret})
				if err != nil {
					return err
				}
				if cl.Rank() != id || cl.Size() != n || cl.Maxes().Value != 1024 || cl.UniverseSize() != n {
					return fmt.Errorf("rank %d: got rank %d size %d maxes %+v", id, cl.Rank(), cl.Size(), cl.Maxes())
				}
				if err := cl.Put(ctx, fmt.Sprintf("k%d", id), strings.Repeat(strconv.Itoa(id), 1024)); err != nil {
					return err
				}
				if err := cl.Put(ctx, fmt.Sprintf("k%d", id), "again"); !errors.Is(err, ErrRefused) {
					return fmt.Errorf("duplicate put: %v", err)
				}
				if err := cl.Put(ctx, "big", strings.Repeat("x", 1025)); err == nil {
					return fmt.Errorf("over-long value accepted")
				}
				if err := cl.Put(ctx, "a b", "x"); err == nil {
					return fmt.Errorf("key with space accepted")
				}
				if err := cl.Barrier(ctx); err != nil {
					return err
				}
				for p := range n {
					v, err := cl.Get(ctx, fmt.Sprintf("k%d", p))
					if err != nil {
						return err
					}
					if v != strings.Repeat(strconv.Itoa(p), 1024) {
						return fmt.Errorf("k%d = %q", p, v[:10])
					}
				}
				if _, err := cl.Get(ctx, "missing"); !errors.Is(err, ErrNotFound) {
					return fmt.Errorf("missing key: %v", err)
				}
				if v, err := cl.Get(ctx, "PMI_process_mapping"); err != nil || v != "(vector,(0,1,4))" {
					return fmt.Errorf("process mapping %q %v", v, err)
				}
				if err := cl.Barrier(ctx); err != nil {
					return err
				}
				return cl.Finalize(ctx)
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestServerRejects(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Size: 2, Secret: "s3cret", HandshakeTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, e := range []Env1{
		{FD: -1, Port: addr, ID: 0, Secret: "wrong"},
		{FD: -1, Port: addr, ID: 0},
		{FD: -1, Port: addr, ID: 2, Secret: "s3cret"},
	} {
		if cl, err := Dial1(ctx, e); err == nil {
			cl.Close()
			t.Errorf("Dial1(%+v) accepted", e)
		}
	}
	cl, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: 1, Secret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cl2, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: 1, Secret: "s3cret"}); err == nil {
		cl2.Close()
		t.Error("second connection for rank 1 accepted")
	}
	// A silent connection is dropped after the handshake timeout.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); err == nil || time.Since(start) > 4*time.Second {
		t.Errorf("silent connection not dropped in time: %v after %v", err, time.Since(start))
	}
}

func TestServerMalformedInput(t *testing.T) {
	s, err := NewServer(ServerConfig{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := net.Pipe()
	go s.ServeConn(a, 0)
	b.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(b)
	for _, bad := range []string{"garbage\n", "cmd=\n", "\n", "cmd=spawn foo=bar\n", "cmd=put kvsname=nope key=a value=b\n"} {
		if _, err := b.Write([]byte(bad)); err != nil {
			t.Fatal(err)
		}
		line, err := readLine(r)
		if err != nil {
			t.Fatalf("after %q: %v", bad, err)
		}
		if !strings.Contains(line, "rc=-1") {
			t.Errorf("reply to %q = %q, want rc=-1", bad, line)
		}
	}
	// A line longer than MaxLine ends the connection instead of buffering.
	go b.Write([]byte("cmd=put value=" + strings.Repeat("x", MaxLine+10) + "\n"))
	if _, err := readLine(r); err == nil {
		t.Error("over-long line did not end the connection")
	}
}

// TestClientMalformedReplies checks that a client facing a broken server
// returns errors and does not hang.
func TestClientMalformedReplies(t *testing.T) {
	replies := []string{
		"not a reply\n",
		"cmd=response_to_init rc=0\ncmd=maxes kvsname_max=256 keylen_max=x vallen_max=1024\n",
		"cmd=response_to_init rc=0\ncmd=wrong\n",
		"cmd=response_to_init rc=5\n",
		"cmd=response_to_init rc=0\ncmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n",                       // then EOF
		"cmd=response_to_init rc=0\ncmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\ncmd=my_kvsname kvsname", // mid-line EOF
	}
	for _, rep := range replies {
		a, b := net.Pipe()
		go func() {
			r := bufio.NewReader(b)
			readLine(r)
			b.Write([]byte(rep))
			// Swallow further requests briefly, then hang up.
			b.SetDeadline(time.Now().Add(200 * time.Millisecond))
			for {
				if _, err := readLine(r); err != nil {
					break
				}
			}
			b.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		_, err := NewClient(ctx, a, 0, 1)
		cancel()
		if err == nil {
			t.Errorf("reply %q: init succeeded", rep)
		}
		if time.Since(start) > 3*time.Second {
			t.Errorf("reply %q: took %v", rep, time.Since(start))
		}
		a.Close()
	}
	// A server that never answers: the context bounds the wait.
	a, b := net.Pipe()
	defer b.Close()
	go func() { bufio.NewReader(b).ReadString('\n') }()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := NewClient(ctx, a, 0, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("silent server: %v, want DeadlineExceeded", err)
	}
}

func TestServerStallAndAbort(t *testing.T) {
	lost := make(chan int, 4)
	stalled := make(chan int, 4)
	aborted := make(chan string, 1)
	_, addr := startServer(t, ServerConfig{
		Size:    2,
		OnLost:  func(r int) { lost <- r },
		OnStall: func(r int) { stalled <- r },
		OnAbort: func(r, code int, msg string) { aborted <- fmt.Sprintf("%d:%d:%s", r, code, msg) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c0, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: 0})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer bcancel()
	go c1.Close() // rank 1 leaves without finalize
	if err := c0.Barrier(bctx); err == nil {
		t.Fatal("barrier completed with a rank gone")
	}
	select {
	case r := <-lost:
		if r != 1 {
			t.Errorf("lost rank %d, want 1", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnLost not called")
	}
	select {
	case r := <-stalled:
		t.Errorf("OnStall(%d) called for a rank already reported lost", r)
	default:
	}
	// c0's stream is now out of step: further use fails clearly.
	if err := c0.Put(ctx, "x", "y"); err == nil {
		t.Error("use after interrupted barrier succeeded")
	}
	c0.Close()

	_, addr = startServer(t, ServerConfig{
		Size:    1,
		OnAbort: func(r, code int, msg string) { aborted <- fmt.Sprintf("%d:%d:%s", r, code, msg) },
	})
	c, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Abort(ctx, 7, "out of\nbananas"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-aborted:
		if got != "0:7:out of bananas" {
			t.Errorf("abort = %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnAbort not called")
	}
}

func TestEnv1FromEnviron(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	if _, err := Env1FromEnviron(env()); !errors.Is(err, ErrNoLauncher) {
		t.Errorf("empty env: %v", err)
	}
	e, err := Env1FromEnviron(env("PMI_FD", "5", "PMI_RANK", "2", "PMI_SIZE", "3"))
	if err != nil || e.FD != 5 || e.Rank != 2 || e.Size != 3 {
		t.Errorf("fd env: %+v %v", e, err)
	}
	e, err = Env1FromEnviron(env("PMI_PORT", "h:12", "PMI_ID", "4", "WEFT_PMI_SECRET", "z"))
	if err != nil || e.Port != "h:12" || e.ID != 4 || e.Secret != "z" || e.FD != -1 {
		t.Errorf("port env: %+v %v", e, err)
	}
	for _, bad := range [][]string{
		{"PMI_FD", "x", "PMI_RANK", "0", "PMI_SIZE", "1"},
		{"PMI_FD", "3", "PMI_RANK", "1", "PMI_SIZE", "1"},
		{"PMI_FD", "3", "PMI_RANK", "0"},
		{"PMI_PORT", "nocolon", "PMI_ID", "0"},
		{"PMI_PORT", "h:1", "PMI_ID", "-1"},
	} {
		if e, err := Env1FromEnviron(env(bad...)); err == nil {
			t.Errorf("env %v accepted: %+v", bad, e)
		}
	}
}

// TestServerLostWithoutFence: a rank that spoke PMI and closes its
// connection without finalize is reported whatever the others do; one that
// never spoke is not, unless a barrier waits for it; a finalized one never.
func TestServerLostWithoutFence(t *testing.T) {
	lost := make(chan int, 8)
	stalled := make(chan int, 8)
	s, err := NewServer(ServerConfig{Size: 4, OnLost: func(r int) { lost <- r }, OnStall: func(r int) { stalled <- r }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clients := make([]*Client, 4)
	peers := make([]net.Conn, 4)
	for r := range 4 {
		a, b := net.Pipe()
		peers[r] = b
		if err := s.Attach(a, r); err != nil {
			t.Fatal(err)
		}
		if r < 2 {
			if clients[r], err = NewClient(ctx, b, r, 4); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Rank 0 finalizes, rank 1 just hangs up; nobody is in a barrier.
	if err := clients[0].Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	clients[1].Close()
	select {
	case r := <-lost:
		if r != 1 {
			t.Fatalf("lost rank %d, want 1", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnLost not called for rank 1, which spoke PMI and left without finalize")
	}
	if !s.Spoke(1) || s.Finalized(1) || !s.Spoke(0) || !s.Finalized(0) || s.Spoke(2) {
		t.Errorf("spoke/finalized: 0 %v/%v 1 %v/%v 2 %v", s.Spoke(0), s.Finalized(0), s.Spoke(1), s.Finalized(1), s.Spoke(2))
	}
	// Rank 2 never speaks and hangs up: a plain program, not an error.
	peers[2].Close()
	// Rank 3 never speaks either: WaitRanks still waits for its connection.
	wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if err := s.WaitRanks(wctx); err == nil {
		t.Error("WaitRanks returned with rank 3's connection open")
	}
	wcancel()
	peers[3].Close()
	if err := s.WaitRanks(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-lost:
		t.Errorf("OnLost(%d) for a rank that never spoke PMI", r)
	case r := <-stalled:
		t.Errorf("OnStall(%d) without a barrier", r)
	default:
	}
}

// TestServerStallSilentRank: a rank that never spoke PMI leaves while
// another waits in a barrier: OnStall.
func TestServerStallSilentRank(t *testing.T) {
	stalled := make(chan int, 4)
	s, err := NewServer(ServerConfig{Size: 2, OnStall: func(r int) { stalled <- r }, OnLost: func(r int) { t.Errorf("OnLost(%d)", r) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a0, b0 := net.Pipe()
	a1, b1 := net.Pipe()
	go s.ServeConn(a0, 0)
	go s.ServeConn(a1, 1)
	c0, err := NewClient(ctx, b0, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
	defer bcancel()
	go func() { c0.Barrier(bctx) }()
	time.Sleep(50 * time.Millisecond) // let rank 0 enter the barrier (either order stalls)
	b1.Close()
	select {
	case r := <-stalled:
		if r != 1 {
			t.Errorf("stalled rank %d, want 1", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnStall not called")
	}
}

// TestServerDuplicateAndImpostor: connections that cannot authenticate
// (wrong secret, silence) do not take rank 0's slot; the real rank 0 gets
// in, and a later authenticated duplicate of rank 0 is refused without
// disturbing it.
func TestServerDuplicateAndImpostor(t *testing.T) {
	secret, _ := NewSecret()
	lost := make(chan int, 4)
	_, addr := startServer(t, ServerConfig{Size: 2, Secret: secret, OnLost: func(r int) { lost <- r }})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Impostor 1 claims rank 0 first with a wrong secret; impostor 2 dials
	// and says nothing, holding its connection.
	if cl, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: 0, Secret: "0123456789abcdef0123456789abcdef"}); err == nil {
		cl.Close()
		t.Fatal("wrong secret accepted")
	}
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	half, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	half.Write([]byte("cmd=initack pmiid=0")) // no newline, no secret
	real0, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: 0, Secret: secret})
	if err != nil {
		t.Fatalf("real rank 0 refused after impostors: %v", err)
	}
	if dup, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: 0, Secret: secret}); err == nil {
		dup.Close()
		t.Fatal("second authenticated connection for rank 0 accepted")
	}
	real1, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: 1, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for i, cl := range []*Client{real0, real1} {
		go func() {
			errs <- func() error {
				if err := cl.Put(ctx, "k"+strconv.Itoa(i), "v"); err != nil {
					return err
				}
				if err := cl.Barrier(ctx); err != nil {
					return err
				}
				if v, err := cl.Get(ctx, "k"+strconv.Itoa(1-i)); err != nil || v != "v" {
					return fmt.Errorf("get: %q %v", v, err)
				}
				return cl.Finalize(ctx)
			}()
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("real rank after the duplicate: %v", err)
		}
	}
	select {
	case r := <-lost:
		t.Errorf("OnLost(%d): a refused connection counted as a rank leaving", r)
	default:
	}
}

// TestServerPendingBounded: at most MaxPending unauthenticated connections
// are accepted at once; silent ones are dropped after HandshakeTimeout and
// a real rank queued behind them still gets in.
func TestServerPendingBounded(t *testing.T) {
	const maxPending = 4
	s, addr := startServer(t, ServerConfig{Size: 1, MaxPending: maxPending, HandshakeTimeout: 300 * time.Millisecond})
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range 12 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		cl, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: 0})
		if err == nil {
			err = cl.Finalize(ctx)
		}
		done <- err
	}()
	peak := 0
	for {
		s.mu.Lock()
		peak = max(peak, len(s.conns))
		s.mu.Unlock()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("real rank behind %d silent connections: %v", len(silent), err)
			}
			// The real rank's connection stays open once authenticated, and
			// its freed slot admits one more silent connection.
			if peak > maxPending+1 {
				t.Errorf("%d connections open at once, MaxPending is %d (+1 authenticated)", peak, maxPending)
			}
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// TestServerFloodMemory: many unauthenticated connections each sending a
// large line without a newline do not make the server hold their bytes, and
// the real job completes meanwhile.
func TestServerFloodMemory(t *testing.T) {
	testenv.Short(t, "opens a thousand connections")
	const (
		n       = 4
		flood   = 1000
		payload = 60 << 10
	)
	secret, _ := NewSecret()
	s, addr := startServer(t, ServerConfig{Size: n, Secret: secret})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc

	junk := []byte("cmd=initack pmiid=0 secret=" + strings.Repeat("x", payload))
	var conns []net.Conn
	var cmu sync.Mutex
	defer func() {
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
	}()
	var fwg sync.WaitGroup
	for w := range 8 {
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			for range flood / 8 {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					t.Errorf("flood connection %d: %v", w, err)
					return
				}
				cmu.Lock()
				conns = append(conns, c)
				cmu.Unlock()
				c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				c.Write(junk) // may fail once the server drops the connection
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for id := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				cl, err := Dial1(ctx, Env1{FD: -1, Port: addr, ID: id, Secret: secret})
				if err != nil {
					return err
				}
				if err := cl.Put(ctx, "k"+strconv.Itoa(id), "v"); err != nil {
					return err
				}
				if err := cl.Barrier(ctx); err != nil {
					return err
				}
				return cl.Finalize(ctx)
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("real rank during the flood: %v", err)
		}
	}
	fwg.Wait()
	// Every flood connection is open and has sent its bytes. The server must
	// not be holding them: poll (bounded) while it drains its backlog.
	var grown uint64
	deadline := time.Now().Add(3 * time.Second)
	for {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		grown = ms.HeapAlloc - min(base, ms.HeapAlloc)
		if grown < 8<<20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.mu.Lock()
	open := len(s.conns)
	s.mu.Unlock()
	t.Logf("%d flood connections of %d KiB: live heap grew %d KiB, %d connections accepted and open", flood, payload>>10, grown>>10, open)
	if grown >= 8<<20 {
		t.Errorf("live heap grew by %d MiB with %d unauthenticated connections open", grown>>20, flood)
	}
}

// flakyListener fails its first fails Accept calls with EMFILE.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
	err   error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: l.err}
	}
	return l.Listener.Accept()
}

// TestServeSurvivesAcceptErrors: EMFILE from Accept is retried, not the end
// of the server; an error that will not pass ends Serve with it.
func TestServeSurvivesAcceptErrors(t *testing.T) {
	s, err := NewServer(ServerConfig{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: l, err: os.NewSyscallError("accept4", syscall.EMFILE)}
	fl.fails.Store(5)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, fl) }()
	cl, err := Dial1(ctx, Env1{FD: -1, Port: l.Addr().String(), ID: 0})
	if err != nil {
		t.Fatalf("client after EMFILE from Accept: %v", err)
	}
	if err := cl.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve after Close: %v", err)
	}

	s2, _ := NewServer(ServerConfig{Size: 1})
	defer s2.Close()
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	broken := &flakyListener{Listener: l2, err: errors.New("listener broken")}
	broken.fails.Store(1 << 30)
	if err := s2.Serve(ctx, broken); err == nil || !strings.Contains(err.Error(), "listener broken") {
		t.Errorf("Serve on a broken listener: %v", err)
	}
}

// FuzzHandshakeLine feeds arbitrary bytes to what an unauthenticated
// PMI_PORT connection goes through: the bounded line read and the initack
// check. Nothing may panic, no line over the limit may come back, and only
// a line with the right secret and an id in range may claim a rank.
//
//	go test -run '^$' -fuzz FuzzHandshakeLine ./internal/pmi
func FuzzHandshakeLine(f *testing.F) {
	const secret = "00112233445566778899aabbccddeeff"
	for _, s := range []string{
		"cmd=initack pmiid=0 secret=" + secret + "\n",
		"cmd=initack pmiid=3 secret=" + secret + "\n",
		"cmd=initack pmiid=-1 secret=" + secret + "\n",
		"cmd=initack pmiid=1\n",
		"cmd=init pmi_version=1 pmi_subversion=1\n",
		"cmd=initack pmiid=0 secret=" + strings.Repeat("x", 600) + "\n",
		"cmd=initack pmiid=0 secret=" + secret,
		"\n", "", "=\n", "cmd=initack pmiid=99999999999999999999\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		line, err := readLineMax(bufio.NewReaderSize(bytes.NewReader(data), 16), maxHandshakeLine)
		if err != nil {
			return
		}
		if len(line) > maxHandshakeLine {
			t.Fatalf("readLineMax returned %d bytes, limit %d", len(line), maxHandshakeLine)
		}
		id, err := checkInitack(line, 3, secret)
		if err != nil {
			return
		}
		m, _ := ParseLine(line)
		if got, _ := m.Get("secret"); got != secret || id < 0 || id >= 3 || m.Cmd != "initack" {
			t.Fatalf("accepted %q as rank %d", line, id)
		}
	})
}

// FuzzParseLine: ParseLine never panics, and what it accepts survives a
// round trip through String.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=abort exitcode=3 error_msg=a b c\n",
		"cmd=get_result rc=0 msg=success value=a=b\n", "key=1 cmd=x\n", "cmd= x\n", "\x00=\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := ParseLine(line)
		if err != nil {
			return
		}
		m2, err := ParseLine(m.String())
		if err != nil || m2.Cmd != m.Cmd {
			t.Fatalf("round trip of %q: %+v -> %q -> %+v, %v", line, m, m.String(), m2, err)
		}
	})
}

// TestAbortText2: a PMI-2 abort reason goes as one line without the
// semicolons Slurm's server would split it at.
func TestAbortText2(t *testing.T) {
	in := "window: fi_cq_readerr: Transport endpoint is not connected; provider errno 32: Broken pipe\nsecond line"
	want := "window: fi_cq_readerr: Transport endpoint is not connected, provider errno 32: Broken pipe second line"
	if got := abortText2(in); got != want {
		t.Errorf("abortText2 = %q, want %q", got, want)
	}
}
