package pmi

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/weft-hpc/weft/internal/wlog"
)

var slog = wlog.Named("pmi")

// ServerConfig configures a PMI-1 Server.
type ServerConfig struct {
	// Size is the number of ranks in the job (required, > 0).
	Size int
	// Secret, when non-empty, must be presented by every PMI_PORT client in
	// its cmd=initack line (secret=...). NewSecret makes a good one.
	Secret string
	// KVSName names the key-value space; a random one is made when empty.
	KVSName string
	// ProcessMapping, when non-empty, is served for the key
	// PMI_process_mapping (MPICH's "(vector,(node,count,ranks),...)" form).
	ProcessMapping string
	// AppNum, when set, is each rank's application number (get_appnum): the
	// index of its program in an MPMD job. Ranks it does not cover get 0.
	AppNum []int
	// MaxKey and MaxValue are announced in get_maxes (defaults 64 and 1024,
	// as Hydra).
	MaxKey, MaxValue int
	// HandshakeTimeout bounds how long an accepted connection may take to
	// authenticate (default 10 s).
	HandshakeTimeout time.Duration
	// MaxPending bounds the accepted PMI_PORT connections that have not yet
	// authenticated (default 128). While that many are pending, Serve
	// accepts no more: later connections wait in the kernel's backlog.
	MaxPending int
	// OnAbort is called (once per abort request, from a server goroutine)
	// when a rank sends cmd=abort.
	OnAbort func(rank, code int, msg string)
	// OnLost is called when a rank that has spoken PMI (authenticated, or
	// sent a command on its PMI_FD connection) closes its connection
	// without finalizing.
	OnLost func(rank int)
	// OnStall is called when a barrier can never complete because a rank
	// that never spoke PMI left (its connection closed).
	OnStall func(rank int)
}

// maxHandshakeLine is the longest line accepted before a PMI_PORT
// connection has authenticated; an initack line is well under 100 bytes.
const maxHandshakeLine = 512

// Server is weft's PMI-1 server: it serves one job's ranks over TCP (PMI_PORT
// mode, authenticated by PMI_ID plus a job secret) or over connections the
// caller hands it (PMI_FD mode). Create it with NewServer, then call Serve.
type Server struct {
	cfg ServerConfig

	mu        sync.Mutex
	kvs       map[string]string
	joined    []bool // rank has connected (authenticated, or handed over by ServeConn)
	spoke     []bool // rank has sent a PMI command
	finalized []bool
	lost      []bool        // connection closed without finalize
	active    int           // rank connections being served
	changed   chan struct{} // closed and replaced when active drops
	barIn     int
	barCh     chan struct{} // closed when the current barrier completes
	closed    bool
	quit      chan struct{} // closed by Close
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
	pending   chan struct{} // one token per unauthenticated connection
}

// NewSecret returns a random 128-bit job secret in hex.
func NewSecret() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pmi: job secret: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// NewServer validates cfg and returns a server ready to Serve.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Size <= 0 {
		return nil, fmt.Errorf("pmi: server size %d must be positive", cfg.Size)
	}
	if cfg.MaxKey == 0 {
		cfg.MaxKey = 64
	}
	if cfg.MaxValue == 0 {
		cfg.MaxValue = 1024
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 128
	}
	if cfg.KVSName == "" {
		s, err := NewSecret()
		if err != nil {
			return nil, err
		}
		cfg.KVSName = "weft_" + s[:12]
	}
	return &Server{
		cfg:       cfg,
		kvs:       make(map[string]string),
		joined:    make([]bool, cfg.Size),
		spoke:     make([]bool, cfg.Size),
		finalized: make([]bool, cfg.Size),
		lost:      make([]bool, cfg.Size),
		changed:   make(chan struct{}),
		barCh:     make(chan struct{}),
		quit:      make(chan struct{}),
		conns:     make(map[net.Conn]struct{}),
		pending:   make(chan struct{}, cfg.MaxPending),
	}, nil
}

// Serve accepts PMI_PORT connections on l until ctx ends or Close is called.
// It returns nil after Close or cancellation. Transient accept errors (out
// of descriptors or memory, an aborted connection) are retried with a
// growing pause, as net/http does; any other accept error is returned.
// Serve may run on several listeners at once; they share MaxPending.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
		case <-s.quit:
		}
		l.Close()
	}()
	var backoff time.Duration
	for {
		// A slot for one more unauthenticated connection, before accepting.
		select {
		case s.pending <- struct{}{}:
		case <-s.quit:
			return nil
		}
		c, err := l.Accept()
		if err != nil {
			<-s.pending
			if s.isClosed() || ctx.Err() != nil {
				return nil
			}
			if !retryableAccept(err) {
				return fmt.Errorf("pmi: accept: %w", err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			slog.Warn("PMI accept failed; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.quit:
				return nil
			}
			continue
		}
		backoff = 0
		if !s.track(c) {
			<-s.pending
			c.Close()
			return nil
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			s.handle(c, -1)
		}()
	}
}

// retryableAccept reports whether an Accept error is worth retrying: a
// timeout, or a resource shortage or aborted connection that may pass.
func retryableAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ServeConn serves one already-authenticated rank over c (PMI_FD mode: the
// client skips the initack handshake). It returns when the client finalizes
// or disconnects, or the server closes.
func (s *Server) ServeConn(c net.Conn, rank int) error {
	if err := s.attach(c, rank); err != nil {
		return err
	}
	defer s.wg.Done()
	defer s.untrack(c)
	s.handle(c, rank)
	return nil
}

// Attach is ServeConn in the background: it registers rank's connection
// before returning (so WaitRanks waits for it) and serves it from a new
// goroutine.
func (s *Server) Attach(c net.Conn, rank int) error {
	if err := s.attach(c, rank); err != nil {
		return err
	}
	go func() {
		defer s.wg.Done()
		defer s.untrack(c)
		s.handle(c, rank)
	}()
	return nil
}

// attach registers a PMI_FD rank connection; on success the caller owes
// s.wg.Done and s.untrack(c) after handle.
func (s *Server) attach(c net.Conn, rank int) error {
	if rank < 0 || rank >= s.cfg.Size {
		c.Close()
		return fmt.Errorf("pmi: rank %d out of range [0,%d)", rank, s.cfg.Size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return net.ErrClosed
	}
	if s.joined[rank] {
		c.Close()
		return fmt.Errorf("%w: rank %d connected twice", ErrRefused, rank)
	}
	s.conns[c] = struct{}{}
	s.joined[rank] = true
	s.active++
	s.wg.Add(1)
	return nil
}

// Close stops the server: it closes every client connection and releases
// blocked barriers. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.quit)
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// WaitRanks waits until no rank connection is being served any more (every
// rank finalized or closed its connection), or ctx ends.
func (s *Server) WaitRanks(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, ch := s.active, s.changed
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("pmi: %d rank connections still open: %w", n, ctx.Err())
		}
	}
}

// Spoke reports whether rank has spoken PMI: authenticated on PMI_PORT, or
// sent a command on its PMI_FD connection.
func (s *Server) Spoke(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rank >= 0 && rank < len(s.spoke) && s.spoke[rank]
}

// Finalized reports whether rank has sent cmd=finalize.
func (s *Server) Finalized(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rank >= 0 && rank < len(s.finalized) && s.finalized[rank]
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// authenticate reads the initack line and answers it with rank and size.
// Until it succeeds the connection holds one pending slot and may send at
// most maxHandshakeLine bytes within HandshakeTimeout.
func (s *Server) authenticate(c net.Conn, r *bufio.Reader) (int, error) {
	_ = c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	defer c.SetDeadline(time.Time{})
	line, err := readLineMax(r, maxHandshakeLine)
	if err != nil {
		return -1, err
	}
	id, err := checkInitack(line, s.cfg.Size, s.cfg.Secret)
	if err != nil {
		return -1, err
	}
	// Only an authenticated connection can claim a rank; the first one
	// keeps it, and a later one is refused without disturbing it.
	s.mu.Lock()
	dup := s.joined[id]
	if !dup && !s.closed {
		s.joined[id] = true
		s.spoke[id] = true
		s.active++
	}
	closed := s.closed
	s.mu.Unlock()
	if dup {
		return -1, fmt.Errorf("%w: rank %d connected twice", ErrRefused, id)
	}
	if closed {
		return -1, net.ErrClosed
	}
	out := NewMsg("initack", "rc", "0").String() +
		NewMsg("set", "size", strconv.Itoa(s.cfg.Size)).String() +
		NewMsg("set", "rank", strconv.Itoa(id)).String() +
		NewMsg("set", "debug", "0").String()
	if _, err := c.Write([]byte(out)); err != nil {
		return id, err // the rank is claimed: leave() accounts for it
	}
	return id, nil
}

// checkInitack parses a PMI_PORT client's first line, cmd=initack
// pmiid=ID [secret=S], and returns the rank it claims when the line is
// well-formed, the id is in [0,size) and the secret matches.
func checkInitack(line string, size int, secret string) (int, error) {
	m, err := ParseLine(line)
	if err != nil {
		return -1, err
	}
	if m.Cmd != "initack" {
		return -1, fmt.Errorf("%w: first command %q is not initack", ErrProtocol, trim(m.Cmd))
	}
	id, err := m.Int("pmiid")
	if err != nil {
		return -1, err
	}
	if secret != "" {
		got, _ := m.Get("secret")
		if subtle.ConstantTimeCompare([]byte(got), []byte(secret)) != 1 {
			return -1, fmt.Errorf("%w: bad job secret", ErrRefused)
		}
	}
	if id < 0 || id >= size {
		return -1, fmt.Errorf("%w: pmiid %d out of range [0,%d)", ErrRefused, id, size)
	}
	return id, nil
}

func (s *Server) handle(c net.Conn, rank int) {
	r := bufio.NewReaderSize(c, 4096)
	if rank < 0 {
		var err error
		rank, err = s.authenticate(c, r)
		if err != nil {
			s.untrack(c) // closed before its slot goes to the next connection
		}
		<-s.pending // authenticated or dropped: the slot is free again
		if err != nil {
			if rank >= 0 {
				s.leave(rank)
			}
			slog.Warn("rejected PMI connection", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
	}
	log := slog.With("rank", rank)
	defer s.leave(rank)
	for {
		line, err := readLine(r)
		if err != nil {
			if !s.isClosed() && !s.Finalized(rank) {
				log.Debug("PMI connection ended", "err", err)
			}
			return
		}
		m, err := ParseLine(line)
		if err != nil {
			log.Warn("malformed PMI line", "err", err)
			if _, werr := c.Write([]byte(NewMsg("error", "rc", "-1", "msg", "malformed_line").String())); werr != nil {
				return
			}
			continue
		}
		s.mu.Lock()
		s.spoke[rank] = true
		s.mu.Unlock()
		reply, done := s.dispatch(rank, m)
		if reply != "" {
			if _, err := c.Write([]byte(reply)); err != nil {
				return
			}
		}
		if done {
			return
		}
	}
}

// leave marks a rank's connection as gone. A rank that spoke PMI and leaves
// without finalizing is reported to OnLost; one that never spoke is
// reported to OnStall if a barrier waits for it.
func (s *Server) leave(rank int) {
	s.mu.Lock()
	lost, stalled := false, false
	if !s.finalized[rank] && !s.closed {
		s.lost[rank] = true
		if s.spoke[rank] {
			lost = true
		} else {
			stalled = s.barIn > 0
		}
	}
	s.active--
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	switch {
	case lost && s.cfg.OnLost != nil:
		s.cfg.OnLost(rank)
	case stalled && s.cfg.OnStall != nil:
		s.cfg.OnStall(rank)
	}
}

// dispatch handles one command; done means the connection should close.
func (s *Server) dispatch(rank int, m Msg) (reply string, done bool) {
	switch m.Cmd {
	case "init":
		return NewMsg("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "0").String(), false
	case "get_maxes":
		return NewMsg("maxes", "kvsname_max", "256", "keylen_max", strconv.Itoa(s.cfg.MaxKey),
			"vallen_max", strconv.Itoa(s.cfg.MaxValue)).String(), false
	case "get_appnum":
		app := 0
		if rank >= 0 && rank < len(s.cfg.AppNum) {
			app = s.cfg.AppNum[rank]
		}
		return NewMsg("appnum", "appnum", strconv.Itoa(app)).String(), false
	case "get_universe_size":
		return NewMsg("universe_size", "size", strconv.Itoa(s.cfg.Size)).String(), false
	case "get_my_kvsname":
		return NewMsg("my_kvsname", "kvsname", s.cfg.KVSName).String(), false
	case "put":
		return s.put(m), false
	case "get":
		return s.get(m), false
	case "barrier_in":
		return s.barrier(rank), false
	case "finalize":
		s.mu.Lock()
		s.finalized[rank] = true
		s.mu.Unlock()
		return NewMsg("finalize_ack").String(), true
	case "abort":
		code, err := m.Int("exitcode")
		if err != nil {
			code = 1
		}
		msg, _ := m.Get("error_msg")
		if s.cfg.OnAbort != nil {
			s.cfg.OnAbort(rank, code, msg)
		}
		return "", false
	default:
		return NewMsg(m.Cmd+"_result", "rc", "-1", "msg", "unsupported_command").String(), false
	}
}

func (s *Server) put(m Msg) string {
	fail := func(msg string) string { return NewMsg("put_result", "rc", "-1", "msg", msg).String() }
	if kvs, _ := m.Get("kvsname"); kvs != s.cfg.KVSName {
		return fail("unknown_kvsname")
	}
	key, ok1 := m.Get("key")
	val, ok2 := m.Get("value")
	if !ok1 || !ok2 || key == "" {
		return fail("missing_key_or_value")
	}
	if len(key) > s.cfg.MaxKey || len(val) > s.cfg.MaxValue {
		return fail("key_or_value_too_long")
	}
	s.mu.Lock()
	_, dup := s.kvs[key]
	if !dup {
		s.kvs[key] = val
	}
	s.mu.Unlock()
	if dup {
		return fail("duplicate_key")
	}
	return NewMsg("put_result", "rc", "0", "msg", "success").String()
}

func (s *Server) get(m Msg) string {
	if kvs, _ := m.Get("kvsname"); kvs != s.cfg.KVSName {
		return NewMsg("get_result", "rc", "-1", "msg", "unknown_kvsname").String()
	}
	key, _ := m.Get("key")
	if key == "PMI_process_mapping" && s.cfg.ProcessMapping != "" {
		return NewMsg("get_result", "rc", "0", "msg", "success", "value", s.cfg.ProcessMapping).String()
	}
	s.mu.Lock()
	v, ok := s.kvs[key]
	s.mu.Unlock()
	if !ok {
		return NewMsg("get_result", "rc", "-1", "msg", "key_"+key+"_not_found").String()
	}
	return NewMsg("get_result", "rc", "0", "msg", "success", "value", v).String()
}

// barrier blocks the calling connection's goroutine until all ranks arrive.
func (s *Server) barrier(rank int) string {
	s.mu.Lock()
	s.barIn++
	ch := s.barCh
	stalled := -1
	if s.barIn == s.cfg.Size {
		s.barIn = 0
		close(s.barCh)
		s.barCh = make(chan struct{})
	} else {
		// A rank that spoke and left was reported to OnLost already.
		for r, l := range s.lost {
			if l && !s.spoke[r] {
				stalled = r
				break
			}
		}
	}
	s.mu.Unlock()
	if stalled >= 0 && s.cfg.OnStall != nil {
		s.cfg.OnStall(stalled)
	}
	select {
	case <-ch:
		return NewMsg("barrier_out").String()
	case <-s.quit:
		return ""
	}
}
