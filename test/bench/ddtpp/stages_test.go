package main

import (
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weft-hpc/weft/test/bench/internal/ddtcases"
)

// threadCPU is the CPU time of the calling thread: what a stage costs
// whatever else shares the cores.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkStages measures, per DDTBench layout at size l, the CPU time
// of each stage a typed message's bytes pass through on one core: the
// node transport's gather test (Flatten up to one block per 256 bytes, as
// it was, and Blocks, as it is), the
// hand pack loop, ddt's whole-message pack (JIT code once compiled) and
// its pack in 64 KiB, 256 KiB and 1 MiB pieces (the node pipeline's), the
// whole-message unpack and the unpack in 256 KiB and 1 MiB pieces (the
// receiver's), the hand unpack loop, and copy() of the same bytes. It reports
// microseconds per stage (median of 15 samples, thread CPU time).
// A sub-benchmark per size label picks the size.
//
//	go test -run '^$' -bench 'Stages/l' -benchtime 1x ./test/bench/ddtpp/
func BenchmarkStages(b *testing.B) {
	for _, size := range ddtcases.Sizes {
		b.Run(size, func(b *testing.B) { stages(b, size) })
	}
}

// stages is BenchmarkStages at one size label.
func stages(b *testing.B, size string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, name := range ddtcases.Names() {
		cs, err := ddtcases.Build(name, size)
		if err != nil {
			b.Fatal(err)
		}
		typed, packed, dst := make([]byte, cs.Typed), make([]byte, cs.Bytes), make([]byte, cs.Bytes)
		ddtcases.Fill(typed, 1)
		hp, hu := cs.Bind(packed, typed)
		n := int(cs.Bytes)
		stages := []struct {
			name string
			f    func()
		}{
			{"flatten", func() { _, _ = cs.Type.Flatten(cs.Count, min(1<<16, n/256)) }}, // the node gather's old cost model
			{"blocks", func() { _, _ = cs.Type.Blocks(cs.Count) }},                      // its cost model
			{"hand-pack", hp},
			{"pack", func() { _, _ = cs.Type.Pack(packed, typed, cs.Count) }},
			{"pack-64k", func() {
				for off := 0; off < n; off += 64 << 10 {
					_, _ = cs.Type.PackRange(packed[off:min(n, off+64<<10)], typed, 0, cs.Count, int64(off))
				}
			}},
			{"unpack", func() { _, _ = cs.Type.Unpack(typed, packed, cs.Count) }},
			{"unpack-256k", func() {
				for off := 0; off < n; off += 256 << 10 {
					_, _ = cs.Type.UnpackRange(typed, packed[off:min(n, off+256<<10)], 0, cs.Count, int64(off))
				}
			}},
			{"unpack-1m", func() {
				for off := 0; off < n; off += 1 << 20 {
					_, _ = cs.Type.UnpackRange(typed, packed[off:min(n, off+1<<20)], 0, cs.Count, int64(off))
				}
			}},
			{"pack-256k", func() {
				for off := 0; off < n; off += 256 << 10 {
					_, _ = cs.Type.PackRange(packed[off:min(n, off+256<<10)], typed, 0, cs.Count, int64(off))
				}
			}},
			{"pack-1m", func() {
				for off := 0; off < n; off += 1 << 20 {
					_, _ = cs.Type.PackRange(packed[off:min(n, off+1<<20)], typed, 0, cs.Count, int64(off))
				}
			}},
			{"hand-unpack", hu},
			{"copy", func() { copy(dst, packed) }},
		}
		line := fmt.Sprintf("%-18s %s %8d", name, size, n)
		for _, s := range stages {
			s.f()
			s.f() // warm (and let the JIT compile)
			var t []time.Duration
			for i := 0; i < 15; i++ {
				t0 := threadCPU()
				s.f()
				t = append(t, threadCPU()-t0)
			}
			sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
			line += fmt.Sprintf("  %s %7.1f", s.name, float64(t[len(t)/2].Nanoseconds())/1e3)
		}
		fmt.Println(line)
	}
}
