// Package fipingpong runs libfabric's fi_pingpong (server and client on
// this machine) for the bench tools that compare with it
// (test/bench/pingpong, test/bench/p2p) and reads its result line.
package fipingpong

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
)

// Result is what fi_pingpong's client reports: the half round trip
// (usec/xfer) and the bandwidth, 2·iterations·size/elapsed in MB/s
// (10^6 bytes).
type Result struct {
	Usec, MBps float64
}

// line is the client's result row: bytes, #sent, #ack, total, time,
// MB/sec, usec/xfer, Mxfers/sec.
var line = regexp.MustCompile(`(?m)^\S+\s+\S+\s+=?\S+\s+\S+\s+(\S+)s\s+(\S+)\s+(\S+)\s+\S+\s*$`)

// Parse reads the client's output.
func Parse(out []byte) (Result, error) {
	m := line.FindSubmatch(out)
	if m == nil {
		return Result{}, fmt.Errorf("cannot parse fi_pingpong output %q", out)
	}
	mbps, err1 := strconv.ParseFloat(string(m[2]), 64)
	usec, err2 := strconv.ParseFloat(string(m[3]), 64)
	if err1 != nil || err2 != nil {
		return Result{}, fmt.Errorf("cannot parse fi_pingpong output %q", out)
	}
	return Result{Usec: usec, MBps: mbps}, nil
}

// Run runs the fi_pingpong at path as server and client over provider
// prov with an RDM endpoint, size-byte messages and iters iterations,
// on a free control port, and returns the client's result. A server
// that cannot bind its port (another program took it between the
// choice and the bind) is retried on a fresh port. The processes are
// killed when ctx ends.
func Run(ctx context.Context, path, prov string, size, iters int) (Result, error) {
	return run(ctx, path, prov, size, iters, freePort)
}

// run is Run with the control port chosen by pickPort.
func run(ctx context.Context, path, prov string, size, iters int, pickPort func() (string, error)) (Result, error) {
	var err error
	for range 5 {
		var r Result
		var retry bool
		r, retry, err = runOnce(ctx, path, prov, size, iters, pickPort)
		if err == nil || !retry || ctx.Err() != nil {
			return r, err
		}
	}
	return Result{}, err
}

// freePort returns a TCP port nobody listens on at this moment.
func freePort() (string, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// runOnce is one try of Run; retry says the server exited before the
// client connected, so another port may succeed.
func runOnce(ctx context.Context, path, prov string, size, iters int, pickPort func() (string, error)) (Result, bool, error) {
	port, err := pickPort()
	if err != nil {
		return Result{}, false, err
	}
	args := []string{"-p", prov, "-e", "rdm", "-S", strconv.Itoa(size), "-I", strconv.Itoa(iters)}
	srv := exec.CommandContext(ctx, path, append(args, "-B", port)...)
	var srvOut proctest.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return Result{}, false, err
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	var out []byte
	for range 50 { // the server needs a moment to listen
		select {
		case werr := <-srvDone: // the server gave up before any client came
			return Result{}, true, fmt.Errorf("fi_pingpong server exited early (%v): %s", werr, srvOut.String())
		case <-time.After(100 * time.Millisecond):
		}
		if strings.Contains(srvOut.String(), "bind()") {
			// The server reports a taken port and keeps waiting.
			srv.Process.Kill()
			<-srvDone
			return Result{}, true, fmt.Errorf("fi_pingpong server could not bind port %s: %s", port, srvOut.String())
		}
		cli := exec.CommandContext(ctx, path, append(args, "-P", port, "127.0.0.1")...)
		out, err = cli.CombinedOutput()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		srv.Process.Kill()
		<-srvDone // the server's output is complete only after Wait
		return Result{}, false, fmt.Errorf("%w: %s / server: %s", err, out, srvOut.String())
	}
	if err := <-srvDone; err != nil {
		return Result{}, false, fmt.Errorf("fi_pingpong server: %w: %s", err, srvOut.String())
	}
	r, err := Parse(out)
	return r, false, err
}
