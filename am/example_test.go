package am_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/weft-hpc/weft/am"
	"github.com/weft-hpc/weft/endpoint"
)

// Two endpoint handles of one process keep a distributed counter table:
// increments are sent as active messages to the rank owning the key, a
// read is a call, and Quiesce separates the update phase from the reads.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	ranks, err := w.Comm().CreateEndpoints(ctx, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	const hInc, hRead = 1, 2
	out := make([]string, 2)
	var wg sync.WaitGroup
	for i, c := range ranks {
		wg.Add(1)
		go func() { // one goroutine per rank
			defer wg.Done()
			defer c.Free()
			e, err := am.Open(ctx, c)
			if err != nil {
				out[i] = err.Error()
				return
			}
			defer e.Close(ctx)
			table := map[uint64]uint64{} // this rank's keys: key%2 == rank
			e.Register(hInc, func(ctx context.Context, m *am.Msg) error {
				table[binary.LittleEndian.Uint64(m.Header())]++
				return nil
			})
			e.Register(hRead, func(ctx context.Context, m *am.Msg) error {
				v := table[binary.LittleEndian.Uint64(m.Header())]
				return m.Reply(binary.LittleEndian.AppendUint64(nil, v))
			})
			key := make([]byte, 8)
			for k := uint64(0); k < 10; k++ { // both ranks count every key
				binary.LittleEndian.PutUint64(key, k)
				if err := e.Send(ctx, int(k%2), hInc, key, nil); err != nil {
					out[i] = err.Error()
					return
				}
			}
			if err := e.Quiesce(ctx); err != nil { // every increment is in
				out[i] = err.Error()
				return
			}
			binary.LittleEndian.PutUint64(key, uint64(7-i))
			r, err := e.Call(ctx, (7-i)%2, hRead, key, nil, nil)
			if err != nil {
				out[i] = err.Error()
				return
			}
			out[i] = fmt.Sprintf("rank %d reads key %d: %d", e.Rank(), 7-i, binary.LittleEndian.Uint64(r))
		}()
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// rank 0 reads key 7: 2
	// rank 1 reads key 6: 2
}
