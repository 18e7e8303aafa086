package pmi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// conn is a request/response stream with context-bounded I/O. Once an I/O
// error or cancellation interrupts an exchange the stream is out of step with
// the peer, so the conn is marked broken and refuses further use.
type conn struct {
	mu     sync.Mutex
	c      net.Conn
	r      *bufio.Reader
	broken error
}

func newConn(c net.Conn) *conn {
	return &conn{c: c, r: bufio.NewReaderSize(c, 4096)}
}

// do runs fn with the connection's deadline tied to ctx. The caller holds mu.
func (c *conn) do(ctx context.Context, op string, fn func() error) error {
	if c.broken != nil {
		return fmt.Errorf("pmi: %s: connection unusable after earlier error: %w", op, c.broken)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pmi: %s: %w", op, err)
	}
	dl, _ := ctx.Deadline()
	_ = c.c.SetDeadline(dl) // zero time = no deadline
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	err := fn()
	stop()
	if err == nil {
		return nil
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		cerr := ctx.Err()
		if cerr == nil && !dl.IsZero() && !time.Now().Before(dl) {
			cerr = context.DeadlineExceeded // the socket deadline beat ctx's timer
		}
		if cerr != nil {
			err = fmt.Errorf("%w (%v)", cerr, err)
		}
	}
	if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrRefused) {
		c.broken = err
	}
	return fmt.Errorf("pmi: %s: %w", op, err)
}

func (c *conn) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = net.ErrClosed
	}
	return c.c.Close()
}

// fileConn turns an inherited socket descriptor into a net.Conn, so deadlines
// work on it.
func fileConn(fd int, name string) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), name)
	if f == nil {
		return nil, fmt.Errorf("pmi: %s=%d is not a valid descriptor", name, fd)
	}
	defer f.Close() // net.FileConn dups it
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("pmi: %s=%d is not a socket: %w", name, fd, err)
	}
	return c, nil
}
