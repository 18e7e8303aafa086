package pmi

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Maxes are the limits a PMI-1 server announces in reply to get_maxes.
type Maxes struct {
	KVSName, Key, Value int
}

// Client is a PMI-1 client. Its methods are safe for concurrent use but the
// protocol is strictly request/response, so calls are serialised.
type Client struct {
	c       *conn
	rank    int
	size    int
	appnum  int
	univ    int
	kvsname string
	maxes   Maxes
}

// Env1 describes how a PMI-1 client finds its server, as read from the
// environment by Env1FromEnviron.
type Env1 struct {
	FD     int    // PMI_FD, or -1
	Rank   int    // PMI_RANK (FD mode)
	Size   int    // PMI_SIZE (FD mode)
	Port   string // PMI_PORT host:port (port mode), or ""
	ID     int    // PMI_ID (port mode)
	Secret string // WEFT_PMI_SECRET (weft's own server), or ""
}

// Env1FromEnviron reads the PMI-1 variables through getenv (os.Getenv when
// nil). It returns ErrNoLauncher when neither PMI_FD nor PMI_PORT is set.
func Env1FromEnviron(getenv func(string) string) (Env1, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	e := Env1{FD: -1, Secret: getenv("WEFT_PMI_SECRET")}
	atoi := func(name string) (int, error) {
		v := getenv(name)
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("pmi: %s=%q is not a non-negative integer", name, v)
		}
		return n, nil
	}
	var err error
	switch {
	case getenv("PMI_FD") != "":
		if e.FD, err = atoi("PMI_FD"); err != nil {
			return e, err
		}
		if e.Rank, err = atoi("PMI_RANK"); err != nil {
			return e, err
		}
		if e.Size, err = atoi("PMI_SIZE"); err != nil {
			return e, err
		}
		if e.Size == 0 || e.Rank >= e.Size {
			return e, fmt.Errorf("pmi: PMI_RANK=%d out of range for PMI_SIZE=%d", e.Rank, e.Size)
		}
	case getenv("PMI_PORT") != "":
		e.Port = getenv("PMI_PORT")
		if _, _, err := net.SplitHostPort(e.Port); err != nil {
			return e, fmt.Errorf("pmi: PMI_PORT=%q is not host:port: %w", e.Port, err)
		}
		if e.ID, err = atoi("PMI_ID"); err != nil {
			return e, err
		}
	default:
		return e, ErrNoLauncher
	}
	return e, nil
}

// Dial1 connects to the PMI-1 server described by e, performs the port-mode
// handshake when needed, then init, get_maxes, get_my_kvsname, get_appnum
// and get_universe_size.
func Dial1(ctx context.Context, e Env1) (*Client, error) {
	var nc net.Conn
	var err error
	if e.FD >= 0 {
		if nc, err = fileConn(e.FD, "PMI_FD"); err != nil {
			return nil, err
		}
	} else {
		var d net.Dialer
		if nc, err = d.DialContext(ctx, "tcp", e.Port); err != nil {
			return nil, fmt.Errorf("pmi: connect to PMI_PORT=%s: %w", e.Port, err)
		}
	}
	cl := &Client{c: newConn(nc), rank: e.Rank, size: e.Size}
	if e.FD < 0 {
		if err := cl.handshake(ctx, e.ID, e.Secret); err != nil {
			nc.Close()
			return nil, err
		}
	}
	if err := cl.init(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return cl, nil
}

// NewClient wraps an established connection to a PMI-1 server that already
// knows this process's rank (PMI_FD style) and performs init.
func NewClient(ctx context.Context, nc net.Conn, rank, size int) (*Client, error) {
	cl := &Client{c: newConn(nc), rank: rank, size: size}
	if err := cl.init(ctx); err != nil {
		return nil, err
	}
	return cl, nil
}

// exchange sends req and reads the reply, which must have command want.
// A reply carrying rc != 0 yields ErrRefused (ErrNotFound for get). An empty
// req.Cmd sends nothing (an unsolicited line is expected); an empty want
// reads nothing.
func (cl *Client) exchange(ctx context.Context, req Msg, want string) (Msg, error) {
	cl.c.mu.Lock()
	defer cl.c.mu.Unlock()
	op := req.Cmd
	if op == "" {
		op = "read " + want
	}
	var rep Msg
	err := cl.c.do(ctx, op, func() error {
		if req.Cmd != "" {
			if _, err := cl.c.c.Write([]byte(req.String())); err != nil {
				return err
			}
		}
		if want == "" {
			return nil
		}
		line, err := readLine(cl.c.r)
		if err != nil {
			return err
		}
		if rep, err = ParseLine(line); err != nil {
			return err
		}
		return checkReply(rep, want)
	})
	return rep, err
}

// readMsg reads one unsolicited line (used by the handshake).
func (cl *Client) readMsg(ctx context.Context, want string) (Msg, error) {
	return cl.exchange(ctx, Msg{}, want)
}

func checkReply(rep Msg, want string) error {
	if rep.Cmd != want {
		return fmt.Errorf("%w: expected cmd=%s, got %q", ErrProtocol, want, trim(rep.String()))
	}
	if rc, ok := rep.Get("rc"); ok && rc != "0" {
		msg, _ := rep.Get("msg")
		if want == "get_result" {
			return fmt.Errorf("%w (rc=%s %s)", ErrNotFound, rc, msg)
		}
		return fmt.Errorf("%w: cmd=%s rc=%s %s", ErrRefused, want, rc, msg)
	}
	return nil
}

func (cl *Client) handshake(ctx context.Context, id int, secret string) error {
	req := NewMsg("initack", "pmiid", strconv.Itoa(id))
	if secret != "" {
		req.Keys = append(req.Keys, "secret")
		req.Vals = append(req.Vals, secret)
	}
	if _, err := cl.exchange(ctx, req, "initack"); err != nil {
		return err
	}
	for _, want := range []string{"size", "rank", "debug"} {
		m, err := cl.readMsg(ctx, "set")
		if err != nil {
			return err
		}
		n, err := m.Int(want)
		if err != nil {
			return fmt.Errorf("pmi: handshake: %w", err)
		}
		switch want {
		case "size":
			cl.size = n
		case "rank":
			cl.rank = n
		}
	}
	if cl.size <= 0 || cl.rank < 0 || cl.rank >= cl.size {
		return fmt.Errorf("%w: handshake gave rank %d of size %d", ErrProtocol, cl.rank, cl.size)
	}
	return nil
}

func (cl *Client) init(ctx context.Context) error {
	rep, err := cl.exchange(ctx, NewMsg("init", "pmi_version", "1", "pmi_subversion", "1"), "response_to_init")
	if err != nil {
		return err
	}
	if v, _ := rep.Get("pmi_version"); v != "" && v != "1" {
		return fmt.Errorf("%w: server speaks PMI version %s", ErrProtocol, v)
	}
	if rep, err = cl.exchange(ctx, NewMsg("get_maxes"), "maxes"); err != nil {
		return err
	}
	if cl.maxes.KVSName, err = rep.Int("kvsname_max"); err != nil {
		return err
	}
	if cl.maxes.Key, err = rep.Int("keylen_max"); err != nil {
		return err
	}
	if cl.maxes.Value, err = rep.Int("vallen_max"); err != nil {
		return err
	}
	if cl.maxes.Key < 8 || cl.maxes.Value < 32 {
		return fmt.Errorf("%w: unusable maxes key=%d value=%d", ErrProtocol, cl.maxes.Key, cl.maxes.Value)
	}
	if rep, err = cl.exchange(ctx, NewMsg("get_my_kvsname"), "my_kvsname"); err != nil {
		return err
	}
	var ok bool
	if cl.kvsname, ok = rep.Get("kvsname"); !ok || cl.kvsname == "" {
		return fmt.Errorf("%w: my_kvsname reply without kvsname", ErrProtocol)
	}
	if rep, err = cl.exchange(ctx, NewMsg("get_appnum"), "appnum"); err != nil {
		return err
	}
	if cl.appnum, err = rep.Int("appnum"); err != nil {
		return err
	}
	if rep, err = cl.exchange(ctx, NewMsg("get_universe_size"), "universe_size"); err != nil {
		return err
	}
	if cl.univ, err = rep.Int("size"); err != nil {
		return err
	}
	return nil
}

// Rank returns this process's rank.
func (cl *Client) Rank() int { return cl.rank }

// Size returns the number of processes in the job.
func (cl *Client) Size() int { return cl.size }

// AppNum returns the application number (0 unless an MPMD launch).
func (cl *Client) AppNum() int { return cl.appnum }

// UniverseSize returns the universe size the server reported.
func (cl *Client) UniverseSize() int { return cl.univ }

// KVSName returns the name of the job's key-value space.
func (cl *Client) KVSName() string { return cl.kvsname }

// Maxes returns the server's limits on names, keys and values.
func (cl *Client) Maxes() Maxes { return cl.maxes }

// Put stores value under key in the job's key-value space. It becomes
// visible to other ranks after the next Barrier.
func (cl *Client) Put(ctx context.Context, key, value string) error {
	if err := checkToken("key", true, key); err != nil {
		return err
	}
	if err := checkToken("value", false, value); err != nil {
		return err
	}
	if len(key) > cl.maxes.Key {
		return fmt.Errorf("pmi: key %q longer than keylen_max %d", key, cl.maxes.Key)
	}
	if len(value) > cl.maxes.Value {
		return fmt.Errorf("pmi: value of %d bytes longer than vallen_max %d", len(value), cl.maxes.Value)
	}
	_, err := cl.exchange(ctx, NewMsg("put", "kvsname", cl.kvsname, "key", key, "value", value), "put_result")
	return err
}

// Barrier blocks until every rank has entered it (barrier_in / barrier_out).
func (cl *Client) Barrier(ctx context.Context) error {
	_, err := cl.exchange(ctx, NewMsg("barrier_in"), "barrier_out")
	return err
}

// Get returns the value stored under key, or an error wrapping ErrNotFound.
func (cl *Client) Get(ctx context.Context, key string) (string, error) {
	if err := checkToken("key", true, key); err != nil {
		return "", err
	}
	rep, err := cl.exchange(ctx, NewMsg("get", "kvsname", cl.kvsname, "key", key), "get_result")
	if err != nil {
		return "", err
	}
	v, ok := rep.Get("value")
	if !ok {
		return "", fmt.Errorf("%w: get_result without value", ErrProtocol)
	}
	return v, nil
}

// Finalize tells the server this rank is done and closes the connection.
func (cl *Client) Finalize(ctx context.Context) error {
	_, err := cl.exchange(ctx, NewMsg("finalize"), "finalize_ack")
	cerr := cl.c.close()
	if err != nil {
		return err
	}
	return cerr
}

// Abort asks the launcher to end the whole job with exit code code. msg is
// sent when the server accepts it (spaces are allowed) and should also be
// printed by the caller. The server normally kills this process in response.
func (cl *Client) Abort(ctx context.Context, code int, msg string) error {
	msg = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ';' {
			return ' '
		}
		return r
	}, msg)
	req := NewMsg("abort", "exitcode", strconv.Itoa(code))
	if msg != "" {
		req.Keys = append(req.Keys, "error_msg")
		req.Vals = append(req.Vals, msg)
	}
	_, err := cl.exchange(ctx, req, "")
	return err
}

// Close closes the connection without finalizing.
func (cl *Client) Close() error { return cl.c.close() }
