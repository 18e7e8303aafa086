package cma

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The sizes compared, and the largest (the peers' buffer).
var benchSizes = []int{64 << 10, 256 << 10, 1 << 20, 4 << 20}

const benchMax = 4 << 20

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkCMA: one copy, process_vm_readv from the peer's buffer.
func BenchmarkCMA(b *testing.B) {
	p := startPeer(b, "hold", benchMax)
	dst := make([]byte, benchMax)
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			d := dst[:size]
			if n, err := Read(p.pid, d, p.addr); err != nil || n != size || !bytes.Equal(d, pattern(1, size)) {
				b.Fatalf("Read = %d, %v", n, err)
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for b.Loop() {
				if _, err := Read(p.pid, d, p.addr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCopy: copy() of the same bytes in one process, the floor.
func BenchmarkCopy(b *testing.B) {
	src, dst := pattern(1, benchMax), make([]byte, benchMax)
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				copy(dst[:size], src[:size])
			}
		})
	}
}

// The staged path: a memfd shared with the peer holds stageSlots chunks of
// stageChunk bytes. For each request the peer copies its buffer in, chunk
// by chunk, publishing chunk i by storing i+1 in the slot's full word; the
// reader copies each chunk out and frees the slot by storing i+1 in its ack
// word. Two copies, pipelined.
const (
	stageChunk = 64 << 10
	stageSlots = 4
	offReq     = 0   // request sequence number
	offSize    = 64  // request size
	offFull    = 256 // stageSlots words, one line each
	offAck     = offFull + stageSlots*64
	offData    = 4096
	stageSize  = offData + stageSlots*stageChunk
)

func word(mem []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&mem[off])) }

// spinUntil waits for cond, yielding now and then (both processes spin on
// a machine of two cores).
func spinUntil(cond func() bool) {
	for i := 1; !cond(); i++ {
		if i%64 == 0 {
			runtime.Gosched()
		}
	}
}

// stagePeer serves staged requests from the memfd at descriptor 3 until
// the parent kills it.
func stagePeer(src []byte) error {
	mem, err := unix.Mmap(3, 0, stageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	req, sz := word(mem, offReq), word(mem, offSize)
	var seq, idx uint64
	for {
		spinUntil(func() bool { return atomic.LoadUint64(req) != seq })
		seq = atomic.LoadUint64(req)
		size := int(atomic.LoadUint64(sz))
		for off := 0; off < size; off += stageChunk {
			s := int(idx % stageSlots)
			if idx >= stageSlots {
				want := idx - stageSlots + 1
				spinUntil(func() bool { return atomic.LoadUint64(word(mem, offAck+s*64)) == want })
			}
			copy(mem[offData+s*stageChunk:offData+(s+1)*stageChunk], src[off:min(off+stageChunk, size)])
			atomic.StoreUint64(word(mem, offFull+s*64), idx+1)
			idx++
		}
	}
}

// stager is the reader's side of the staged path.
type stager struct {
	mem      []byte
	seq, idx uint64
}

func (st *stager) fetch(dst []byte) {
	atomic.StoreUint64(word(st.mem, offSize), uint64(len(dst)))
	st.seq++
	atomic.StoreUint64(word(st.mem, offReq), st.seq)
	for off := 0; off < len(dst); off += stageChunk {
		s := int(st.idx % stageSlots)
		want := st.idx + 1
		spinUntil(func() bool { return atomic.LoadUint64(word(st.mem, offFull+s*64)) == want })
		copy(dst[off:min(off+stageChunk, len(dst))], st.mem[offData+s*stageChunk:])
		atomic.StoreUint64(word(st.mem, offAck+s*64), want)
		st.idx++
	}
}

// BenchmarkStaged: two copies through a shared memfd staging buffer,
// pipelined in 64 KiB chunks.
func BenchmarkStaged(b *testing.B) {
	fd, err := unix.MemfdCreate("weft-cma-bench", unix.MFD_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	defer f.Close()
	if err := f.Truncate(stageSize); err != nil {
		b.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, stageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)
	startPeer(b, "stage", benchMax, f)
	st := &stager{mem: mem}
	dst := make([]byte, benchMax)
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			d := dst[:size]
			clear(d)
			st.fetch(d)
			if !bytes.Equal(d, pattern(1, size)) {
				b.Fatal("staged bytes differ from the peer's")
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for b.Loop() {
				st.fetch(d)
			}
		})
	}
}
