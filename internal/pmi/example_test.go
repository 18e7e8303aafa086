package pmi_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/weft-hpc/weft/internal/pmi"
)

// A one-rank job: weft's PMI-1 server on a loopback port and a client that
// connects to it the way a rank started by fabrun does (PMI_PORT + PMI_ID +
// WEFT_PMI_SECRET).
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	secret, _ := pmi.NewSecret()
	srv, err := pmi.NewServer(pmi.ServerConfig{Size: 1, Secret: secret})
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Serve(ctx, l)
	defer srv.Close()

	cl, err := pmi.Dial1(ctx, pmi.Env1{FD: -1, Port: l.Addr().String(), ID: 0, Secret: secret})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = cl.Put(ctx, "greeting", "hello")
	_ = cl.Barrier(ctx)
	v, _ := cl.Get(ctx, "greeting")
	fmt.Printf("rank %d of %d read %s\n", cl.Rank(), cl.Size(), v)
	_ = cl.Finalize(ctx)
	// Output: rank 0 of 1 read hello
}
