package endpoint_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/misuse"
)

// TestMisuse: every exported method of a communicator (a Dup of the
// world, an endpoint handle), of a request, the world, a group, Cartesian
// and graph topologies, persistent and partitioned requests and a matched
// message, called over
// and over with drawn bad arguments (internal/misuse: negative and huge
// counts, ranks and tags, nil and zero values, uncommitted types,
// contexts that end at once), returns: no panic, no hang. Communicators
// the calls make are freed; the world is a private one, closed at the end.
func TestMisuse(t *testing.T) {
	singleton(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	defer w.Close()
	release := func(v any) {
		switch x := v.(type) {
		case *endpoint.Comm:
			x.Free()
		case []*endpoint.Comm:
			for _, c := range x {
				c.Free()
			}
		}
	}
	rounds := 30
	if testing.Short() {
		rounds = 10
	}
	for seed := range uint64(rounds) {
		p := misuse.New(seed, misuse.Config{Skip: []string{"Free", "Close"}, Release: release})
		c, err := w.Comm().Dup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		eps, err := c.CreateEndpoints(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Irecv(make([]byte, 8), 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		cart, err := c.CartCreate(ctx, []int{1}, []bool{true})
		if err != nil {
			t.Fatal(err)
		}
		graph, err := c.GraphCreate(ctx, []int{0}, []int{0})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		sendP, err := c.SendInit(buf, 8, ddt.Int64, 0, 7)
		if err != nil {
			t.Fatal(err)
		}
		recvP, err := c.RecvInit(make([]byte, 64), 8, ddt.Int64, 0, 7)
		if err != nil {
			t.Fatal(err)
		}
		psend, err := c.PsendInit(make([]byte, 64), 4, 0, 9)
		if err != nil {
			t.Fatal(err)
		}
		precv, err := c.PrecvInit(make([]byte, 64), 4, 0, 9)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(ctx, buf[:8], 0, 11); err != nil {
			t.Fatal(err)
		}
		msg, err := c.Mprobe(ctx, 0, 11)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []any{c, eps[0], r, w, c.Group(), cart, graph, sendP, recvP, psend, precv, msg} {
			for _, bad := range p.Methods(v) {
				t.Errorf("seed %d: %s", seed, bad)
			}
		}
		if err := c.Send(ctx, make([]byte, 8), 0, 5); err != nil { // completes r
			t.Logf("seed %d: the Send that matches the receive: %v", seed, err)
		}
		// The package's functions, the generic ones for a scalar and a
		// struct, with c drawn most of the time for a *Comm.
		type pt struct {
			X, Y float64
			N    int32
		}
		fp := misuse.New(seed, misuse.Config{Release: release,
			Special: func(r *rand.Rand, ty reflect.Type) (reflect.Value, bool) {
				if ty == reflect.TypeFor[*endpoint.Comm]() {
					return reflect.ValueOf([]*endpoint.Comm{c, c, eps[0], nil, {}}[r.IntN(5)]), true
				}
				return reflect.Value{}, false
			}})
		for _, bad := range fp.Funcs(map[string]any{
			"AsBytes": endpoint.AsBytes[float64], "DimsCreate": endpoint.DimsCreate,
			"IrecvOf": endpoint.IrecvOf[pt], "IrecvSlice": endpoint.IrecvSlice[int32],
			"IsendOf": endpoint.IsendOf[pt], "IsendSlice": endpoint.IsendSlice[int32],
			"RecvOf": endpoint.RecvOf[pt], "RecvSlice": endpoint.RecvSlice[float64],
			"SendOf": endpoint.SendOf[pt], "SendSlice": endpoint.SendSlice[float64],
			"ReleaseAll": endpoint.ReleaseAll, "StartAll": endpoint.StartAll, "StartAllInto": endpoint.StartAllInto,
			"TestAll": endpoint.TestAll, "TestAny": endpoint.TestAny, "TestSome": endpoint.TestSome,
			"WaitAll": endpoint.WaitAll, "WaitAny": endpoint.WaitAny, "WaitSome": endpoint.WaitSome,
		}) {
			t.Errorf("seed %d: %s", seed, bad)
		}
		for _, f := range []func() error{sendP.Free, recvP.Free, psend.Free, precv.Free, cart.Free, graph.Free} {
			if err := f(); err != nil {
				t.Logf("seed %d: Free: %v", seed, err)
			}
		}
		eps[0].Free()
		c.Free()
	}
}
