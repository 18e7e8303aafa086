package shmring

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/weft-hpc/weft/errs"
)

// FuzzRegion attaches both ends to arbitrary region bytes and drains the
// ring: every outcome must be a message or an error wrapping ErrInvalid,
// never a panic or an endless ring.
func FuzzRegion(f *testing.F) {
	seed := func(cells, maxInline int, edit func(m []byte)) []byte {
		m := alignedMem(Layout(cells))
		if err := Init(m, cells, maxInline); err != nil {
			f.Fatal(err)
		}
		pr, err := NewProducer(m)
		if err != nil {
			f.Fatal(err)
		}
		for i := range 5 {
			pr.TrySend(uint64(i), pattern(uint64(i), i*30))
		}
		if edit != nil {
			edit(m)
		}
		return m
	}
	f.Add(seed(8, MaxInlineFor(8), nil), uint16(64))
	f.Add(seed(16, 100, nil), uint16(0))
	f.Add(seed(4, 10, func(m []byte) { binary.LittleEndian.PutUint32(m[headerBytes+16:], 1000) }), uint16(8))
	f.Add(seed(8, 200, func(m []byte) { binary.LittleEndian.PutUint64(m[offRead:], 1<<63) }), uint16(200))
	f.Add([]byte{}, uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, bufLen uint16) {
		mem := alignedMem(len(data))
		copy(mem, data)
		isInvalid := func(err error) {
			if err != nil && !errors.Is(err, errs.ErrInvalid) && !errors.Is(err, errs.ErrTruncated) {
				t.Fatalf("error not wrapping ErrInvalid or ErrTruncated: %v", err)
			}
		}
		co, err := NewConsumer(mem)
		isInvalid(err)
		if err == nil {
			buf := make([]byte, bufLen)
			for range 2 * MaxCells {
				if _, _, _, err := co.Peek(); err != nil {
					isInvalid(err)
					break
				}
				_, n, ok, err := co.TryRecv(buf)
				isInvalid(err)
				if !ok {
					break
				}
				if n > co.MaxInline() {
					t.Fatalf("message of %d bytes past the maximum %d", n, co.MaxInline())
				}
			}
		}
		pr, err := NewProducer(mem)
		isInvalid(err)
		if err == nil {
			for i := range 4 {
				if _, err := pr.TrySend(uint64(i), make([]byte, i*50)); err != nil {
					isInvalid(err)
				}
			}
		}
	})
}
