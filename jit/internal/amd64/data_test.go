package amd64

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestTables checks Table against byte-by-byte encoding at both widths,
// after existing code and with negative values (two's complement, low
// bits), and that another width is an error.
func TestTables(t *testing.T) {
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
		a.Table(w, vs)
		a.Table(w, nil)
		got, err := a.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("width %d: % x, want % x", w, got, want)
		}
	}
	a := New(2)
	a.Table(2, vs)
	if _, err := a.Finish(); err == nil {
		t.Fatal("Table of width 2 accepted")
	}
}
