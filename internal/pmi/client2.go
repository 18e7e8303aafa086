package pmi

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// PMI-2 limits from the PMI-2 specification (and Slurm's implementation).
const (
	PMI2MaxKey   = 64
	PMI2MaxValue = 1024
)

// Client2 is a PMI-2 client, as spoken to Slurm's "srun --mpi=pmi2".
// Calls are serialised; the type is safe for concurrent use.
type Client2 struct {
	c      *conn
	rank   int
	size   int
	appnum int
	jobid  string
}

// Env2 describes how a PMI-2 client reaches its server.
type Env2 struct {
	FD    int    // PMI_FD
	Rank  int    // PMI_RANK
	JobID string // PMI_JOBID
}

// Env2FromEnviron reads PMI_FD, PMI_RANK and PMI_JOBID through getenv
// (os.Getenv when nil); ErrNoLauncher when PMI_FD is unset.
func Env2FromEnviron(getenv func(string) string) (Env2, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	e := Env2{FD: -1, JobID: getenv("PMI_JOBID")}
	if getenv("PMI_FD") == "" {
		return e, ErrNoLauncher
	}
	var err error
	if e.FD, err = strconv.Atoi(getenv("PMI_FD")); err != nil || e.FD < 0 {
		return e, fmt.Errorf("pmi: PMI_FD=%q is not a descriptor", getenv("PMI_FD"))
	}
	if v := getenv("PMI_RANK"); v != "" {
		if e.Rank, err = strconv.Atoi(v); err != nil || e.Rank < 0 {
			return e, fmt.Errorf("pmi: PMI_RANK=%q is not a rank", v)
		}
	}
	return e, nil
}

// Dial2 performs fullinit over the inherited PMI_FD socket.
func Dial2(ctx context.Context, e Env2) (*Client2, error) {
	nc, err := fileConn(e.FD, "PMI_FD")
	if err != nil {
		return nil, err
	}
	cl, err := NewClient2(ctx, nc, e.Rank, e.JobID)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return cl, nil
}

// NewClient2 performs fullinit on an established connection.
func NewClient2(ctx context.Context, nc net.Conn, rank int, jobid string) (*Client2, error) {
	cl := &Client2{c: newConn(nc), rank: rank, jobid: jobid}
	// PMI-2 sessions open with one PMI-1 style line that selects version 2.
	if err := cl.hello(ctx); err != nil {
		return nil, err
	}
	req := NewMsg("fullinit", "pmi_version", "2", "pmi_subversion", "0", "pmirank", strconv.Itoa(rank))
	if jobid != "" {
		req.Keys = append(req.Keys, "pmijobid")
		req.Vals = append(req.Vals, jobid)
	}
	req.Keys = append(req.Keys, "threaded")
	req.Vals = append(req.Vals, "FALSE")
	rep, err := cl.exchange(ctx, req, "fullinit-response")
	if err != nil {
		return nil, err
	}
	if cl.rank, err = rep.Int("rank"); err != nil {
		return nil, err
	}
	if cl.size, err = rep.Int("size"); err != nil {
		return nil, err
	}
	if cl.size <= 0 || cl.rank < 0 || cl.rank >= cl.size {
		return nil, fmt.Errorf("%w: fullinit gave rank %d of size %d", ErrProtocol, cl.rank, cl.size)
	}
	if a, err := rep.Int("appnum"); err == nil {
		cl.appnum = a
	}
	return cl, nil
}

// hello sends "cmd=init pmi_version=2" as a PMI-1 line and checks the reply.
func (cl *Client2) hello(ctx context.Context) error {
	cl.c.mu.Lock()
	defer cl.c.mu.Unlock()
	return cl.c.do(ctx, "init", func() error {
		if _, err := cl.c.c.Write([]byte(NewMsg("init", "pmi_version", "2", "pmi_subversion", "0").String())); err != nil {
			return err
		}
		line, err := readLine(cl.c.r)
		if err != nil {
			return err
		}
		rep, err := ParseLine(line)
		if err != nil {
			return err
		}
		if err := checkReply(rep, "response_to_init"); err != nil {
			return err
		}
		if v, _ := rep.Get("pmi_version"); v != "2" {
			return fmt.Errorf("%w: server answered PMI-2 init with pmi_version=%s", ErrProtocol, v)
		}
		return nil
	})
}

func (cl *Client2) exchange(ctx context.Context, req Msg, want string) (Msg, error) {
	cl.c.mu.Lock()
	defer cl.c.mu.Unlock()
	var rep Msg
	err := cl.c.do(ctx, req.Cmd, func() error {
		if _, err := cl.c.c.Write([]byte(FormatMsg2(req))); err != nil {
			return err
		}
		if want == "" {
			return nil
		}
		var err error
		if rep, err = readMsg2(cl.c.r); err != nil {
			return err
		}
		if rep.Cmd != want {
			return fmt.Errorf("%w: expected cmd=%s, got cmd=%s", ErrProtocol, want, rep.Cmd)
		}
		if rc, ok := rep.Get("rc"); ok && rc != "0" {
			msg, _ := rep.Get("errmsg")
			return fmt.Errorf("%w: cmd=%s rc=%s %s", ErrRefused, want, rc, msg)
		}
		return nil
	})
	return rep, err
}

// Rank returns this process's rank.
func (cl *Client2) Rank() int { return cl.rank }

// Size returns the number of processes in the job.
func (cl *Client2) Size() int { return cl.size }

// AppNum returns the application number reported by fullinit.
func (cl *Client2) AppNum() int { return cl.appnum }

// Put stores value under key (kvs-put); visible to others after Fence.
func (cl *Client2) Put(ctx context.Context, key, value string) error {
	if err := checkToken("key", true, key); err != nil {
		return err
	}
	if len(key) > PMI2MaxKey || len(value) > PMI2MaxValue {
		return fmt.Errorf("pmi: key %q or its %d-byte value exceeds PMI-2 limits (%d, %d)", key, len(value), PMI2MaxKey, PMI2MaxValue)
	}
	if strings.ContainsAny(value, "\n") {
		return fmt.Errorf("pmi: value contains a newline")
	}
	_, err := cl.exchange(ctx, NewMsg("kvs-put", "key", key, "value", value), "kvs-put-response")
	return err
}

// Fence is the collective kvs-fence.
func (cl *Client2) Fence(ctx context.Context) error {
	_, err := cl.exchange(ctx, NewMsg("kvs-fence"), "kvs-fence-response")
	return err
}

// Get returns the value for key (kvs-get with srcid -1), or ErrNotFound.
func (cl *Client2) Get(ctx context.Context, key string) (string, error) {
	if err := checkToken("key", true, key); err != nil {
		return "", err
	}
	req := NewMsg("kvs-get", "jobid", cl.jobid, "srcid", "-1", "key", key)
	if cl.jobid == "" {
		req = NewMsg("kvs-get", "srcid", "-1", "key", key)
	}
	return cl.found(ctx, req, "kvs-get-response", key)
}

// JobInfo returns a job attribute (info-getjobattr), e.g.
// PMI_process_mapping.
func (cl *Client2) JobInfo(ctx context.Context, key string) (string, error) {
	return cl.found(ctx, NewMsg("info-getjobattr", "key", key), "info-getjobattr-response", key)
}

func (cl *Client2) found(ctx context.Context, req Msg, want, key string) (string, error) {
	rep, err := cl.exchange(ctx, req, want)
	if err != nil {
		return "", err
	}
	if f, _ := rep.Get("found"); !strings.EqualFold(f, "TRUE") {
		return "", fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	v, ok := rep.Get("value")
	if !ok {
		return "", fmt.Errorf("%w: %s without value", ErrProtocol, want)
	}
	return v, nil
}

// Finalize ends this rank's PMI-2 session and closes the connection.
func (cl *Client2) Finalize(ctx context.Context) error {
	_, err := cl.exchange(ctx, NewMsg("finalize"), "finalize-response")
	cerr := cl.c.close()
	if err != nil {
		return err
	}
	return cerr
}

// Abort asks the launcher to kill the whole job.
func (cl *Client2) Abort(ctx context.Context, code int, msg string) error {
	_ = code // PMI-2 abort carries no exit code; Slurm reports a failure
	_, err := cl.exchange(ctx, NewMsg("abort", "isworld", "TRUE", "msg", abortText2(msg)), "")
	return err
}

// abortText2 is msg as one line without semicolons. The wire format
// escapes a ';' in a value as ";;", but Slurm 22.05's PMI-2 server splits
// the abort message there anyway and logs "no value for key" with the
// rest of the message as a key; the reason is free text, so ',' stands in.
func abortText2(msg string) string {
	return strings.NewReplacer("\n", " ", ";", ",").Replace(msg)
}

// Close closes the connection without finalizing.
func (cl *Client2) Close() error { return cl.c.close() }
