// Package fipingpong runs libfabric's fi_pingpong (server and client on
// this machine) for the bench tools that compare with it
// (test/bench/pingpong, test/bench/p2p) and reads its result line.
package fipingpong

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"regexp"
	"strconv"
	"time"
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
// on a random control port, and returns the client's result. The
// processes are killed when ctx ends.
func Run(ctx context.Context, path, prov string, size, iters int) (Result, error) {
	port := strconv.Itoa(20000 + rand.Intn(20000))
	args := []string{"-p", prov, "-e", "rdm", "-S", strconv.Itoa(size), "-I", strconv.Itoa(iters)}
	srv := exec.CommandContext(ctx, path, append(args, "-B", port)...)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return Result{}, err
	}
	var out []byte
	var err error
	for range 50 { // the server needs a moment to listen
		time.Sleep(100 * time.Millisecond)
		cli := exec.CommandContext(ctx, path, append(args, "-P", port, "127.0.0.1")...)
		out, err = cli.CombinedOutput()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		srv.Process.Kill()
		srv.Wait() // the server's output is complete only after Wait
		return Result{}, fmt.Errorf("%w: %s / server: %s", err, out, srvOut.String())
	}
	if err := srv.Wait(); err != nil {
		return Result{}, fmt.Errorf("fi_pingpong server: %w: %s", err, srvOut.String())
	}
	return Parse(out)
}
