package fabric_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/weft-hpc/weft/fabric"
)

// One batch carries a receive and a message; the peer answers with one
// PostAndRead call that injects the reply and reads its completion queue in
// the same crossing into C.
func ExampleEndpoint_PostBatch() {
	info, err := fabric.Select(&fabric.Hints{Provider: "shm", Caps: fabric.CapMsg | fabric.CapTagged}, true)
	if err != nil {
		log.Fatal(err)
	}
	fab, err := fabric.OpenFabric(info)
	if err != nil {
		log.Fatal(err)
	}
	defer fab.Close()
	dom, err := fab.OpenDomain(info)
	if err != nil {
		log.Fatal(err)
	}
	av, err := dom.OpenAV(2)
	if err != nil {
		log.Fatal(err)
	}
	var eps [2]*fabric.Endpoint
	var cqs [2]*fabric.CQ
	var names [2][]byte
	for i := range eps {
		if cqs[i], err = dom.OpenCQ(64); err != nil {
			log.Fatal(err)
		}
		if eps[i], err = dom.OpenEndpoint(info, cqs[i], av); err != nil {
			log.Fatal(err)
		}
		if names[i], err = eps[i].Name(); err != nil {
			log.Fatal(err)
		}
	}
	addrs, err := av.Insert(names[0], names[1])
	if err != nil {
		log.Fatal(err)
	}
	// Buffers in an Op must be off the Go heap (Alloc) or pinned.
	buf, err := dom.Alloc(4096)
	if err != nil {
		log.Fatal(err)
	}
	b := buf.Bytes()
	rx0, rx1, tx0, tx1 := b[0:64], b[64:128], b[128:192], b[192:256]
	copy(tx0, "ping")
	copy(tx1, "pong")
	const ping, pong = 1, 2

	// post posts ops on endpoint i in as few calls as the queues allow: on
	// ErrAgain it drives progress on both sides and posts the rest.
	post := func(i int, ops []fabric.Op) {
		for len(ops) > 0 {
			posted, err := eps[i].PostBatch(ops)
			if err != nil && !errors.Is(err, fabric.ErrAgain) {
				log.Fatal(err)
			}
			ops = ops[posted:]
			cqs[0].Read(nil) // an empty Read only drives progress (the
			cqs[1].Read(nil) // first message to a peer sets up the connection)
		}
	}
	// wait reads one completion from endpoint i's CQ: PostAndRead without
	// ops is a read that spins in C.
	var out [1]fabric.Completion
	wait := func(i int) fabric.Completion {
		for {
			_, n, err := eps[i].PostAndRead(nil, cqs[i], out[:], 1000)
			if err != nil {
				log.Fatal(err)
			}
			if n == 1 {
				return out[0]
			}
			cqs[1-i].Read(nil)
		}
	}

	// Endpoint 1 waits for a ping; endpoint 0 posts the receive for the
	// pong and the ping in one call.
	post(1, []fabric.Op{fabric.TRecvOp(rx1, buf.Desc(), fabric.AddrUnspec, ping, 0, 11)})
	post(0, []fabric.Op{
		fabric.TRecvOp(rx0, buf.Desc(), fabric.AddrUnspec, pong, 0, 10),
		fabric.TInjectOp(tx0[:4], addrs[1], ping),
	})
	c := wait(1)
	fmt.Printf("endpoint 1 got %q\n", rx1[:c.Len])

	// Endpoint 1 answers with one call that injects the pong and spins on
	// its CQ (a ping-pong loop would also repost its receive in it).
	posted, n, err := eps[1].PostAndRead([]fabric.Op{fabric.TInjectOp(tx1[:4], addrs[0], pong)}, cqs[1], out[:], 100)
	if err != nil || posted != 1 || n != 0 {
		log.Fatal(posted, n, err) // EAGAIN is not expected on a connected peer here
	}
	c = wait(0)
	fmt.Printf("endpoint 0 got %q\n", rx0[:c.Len])
	// Output:
	// endpoint 1 got "ping"
	// endpoint 0 got "pong"
}
