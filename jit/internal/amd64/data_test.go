package amd64

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestDataTables checks Data32 and Data64 against byte-by-byte encoding,
// after existing code and with negative values (two's complement, low bits).
func TestDataTables(t *testing.T) {
	vs := []int64{0, 1, -1, 1<<31 - 1, -1 << 31, 1 << 40, 0x0123456789abcdef}
	for _, w := range []int{4, 8} {
		a := New(2)
		a.Ret()
		want := []byte{0xc3}
		for _, v := range vs {
			if w == 4 {
				want = binary.LittleEndian.AppendUint32(want, uint32(v))
			} else {
				want = binary.LittleEndian.AppendUint64(want, uint64(v))
			}
		}
		if w == 4 {
			a.Data32(vs)
			a.Data32(nil)
		} else {
			a.Data64(vs)
			a.Data64(nil)
		}
		got, err := a.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("width %d: % x, want % x", w, got, want)
		}
	}
}
