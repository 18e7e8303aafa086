package fipingpong

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	out := "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n" +
		"8       1k      =1k      15k         0.00s      9.63       0.83       1.20\n"
	r, err := Parse([]byte(out))
	if err != nil || r.Usec != 0.83 || r.MBps != 9.63 {
		t.Errorf("Parse = %+v, %v", r, err)
	}
	for _, bad := range []string{"", "bytes #sent\n", "8 1k =1k 15k 0.00s fast 0.83 1.20\n"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestRunRetriesTakenPort gives the first try a port another listener
// holds: the server cannot bind it, and Run must succeed on the next.
func TestRunRetriesTakenPort(t *testing.T) {
	path, err := exec.LookPath("fi_pingpong")
	if err != nil {
		t.Fatalf("fi_pingpong not installed (make test installs libfabric-bin): %v", err)
	}
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // a client that reaches this port is turned away
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	taken := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	tries := 0
	pick := func() (string, error) {
		tries++
		if tries == 1 {
			return taken, nil
		}
		return freePort()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := run(ctx, path, "tcp", 8, 100, pick)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if tries < 2 || r.Usec <= 0 {
		t.Errorf("tries %d, result %+v", tries, r)
	}
}
