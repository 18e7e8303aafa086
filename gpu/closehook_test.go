package gpu

import (
	"errors"
	"sync"
	"testing"

	"github.com/weft-hpc/weft/internal/devhook"
)

// TestCloseHooks: Close runs the hooks of the device's users first, in
// the order they were registered, while the device's buffers are still
// allocated (and new calls already fail with ErrClosed); a removed hook
// does not run; only then are the buffers freed. No hook registers on a
// closed device, and concurrent Closes run each hook once.
func TestCloseHooks(t *testing.T) {
	d := newSimDevice()
	b, err := d.AllocHost(64)
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	var mu sync.Mutex
	hook := func(i int) func() {
		return func() {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, i)
			if b.Bytes() == nil || d.Stats().Buffers != 1 {
				t.Errorf("hook %d: the buffer was freed before the hooks ran", i)
			}
			if _, err := d.Alloc(8); !errors.Is(err, ErrClosed) {
				t.Errorf("hook %d: Alloc on a closing device: %v, want ErrClosed", i, err)
			}
		}
	}
	for i := range 3 {
		remove, ok := devhook.OnClose(d, hook(i))
		if !ok {
			t.Fatal("OnClose on an open device refused")
		}
		if i == 1 {
			remove()
		}
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if d.Close() != nil { // all returned: the memory is freed now
		t.Fatal("second Close failed")
	}
	if len(order) != 2 || order[0] != 0 || order[1] != 2 {
		t.Fatalf("hooks ran %v, want [0 2]", order)
	}
	if b.Bytes() != nil || d.Stats().Buffers != 0 {
		t.Fatal("the buffer outlived Close")
	}
	if _, ok := devhook.OnClose(d, func() { t.Error("hook of a closed device ran") }); ok {
		t.Fatal("OnClose on a closed device accepted")
	}
}
