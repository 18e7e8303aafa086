package endpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/testenv"
)

// A shared-memory region left in /dev/shm by a dead process whose pid this
// process now has (libfabric shm names regions <pid>:<n>:<m>) must not stop
// Init: the next endpoint name is tried.
func TestStaleShmRegion(t *testing.T) {
	singleton(t)
	if _, err := os.Stat("/dev/shm"); err != nil {
		testenv.Skip(t, "dev-shm", "no /dev/shm: %v", err)
	}
	pid := strconv.Itoa(os.Getpid())
	// the highest endpoint index this process has used so far
	next := 0
	ents, _ := os.ReadDir("/dev/shm")
	for _, e := range ents {
		f := strings.Split(e.Name(), ":")
		if len(f) == 3 && f[0] == pid {
			if n, err := strconv.Atoi(f[2]); err == nil && n+1 > next {
				next = n + 1
			}
		}
	}
	var made []string
	for i := next; i < next+3; i++ {
		p := filepath.Join("/dev/shm", fmt.Sprintf("%s:0:%d", pid, i))
		if err := os.WriteFile(p, []byte("stale"), 0o600); err != nil {
			testenv.Skip(t, "dev-shm", "cannot write a stale region into /dev/shm: %v", err)
		}
		made = append(made, p)
	}
	defer func() {
		for _, p := range made {
			os.Remove(p)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		t.Fatalf("Init with stale regions %v: %v", made, err)
	}
	defer w.Close()
	if err := w.Comm().Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}
