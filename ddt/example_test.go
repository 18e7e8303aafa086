package ddt_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/weft-hpc/weft/ddt"
)

// Pack the second column of a 4×3 row-major float64 matrix.
func Example() {
	const rows, cols = 4, 3
	mat := make([]byte, rows*cols*8)
	for i := 0; i < rows*cols; i++ {
		binary.LittleEndian.PutUint64(mat[i*8:], math.Float64bits(float64(i)))
	}
	col, err := ddt.Vector(rows, 1, cols, ddt.Float64)
	if err != nil {
		panic(err)
	}
	if err := col.Commit(); err != nil {
		panic(err)
	}
	// Displacement 0 of the type is mat[8]: the first element of column 1.
	packed := make([]byte, col.Size())
	if _, err := col.PackRange(packed, mat, 8, 1, 0); err != nil {
		panic(err)
	}
	for i := 0; i < rows; i++ {
		fmt.Print(math.Float64frombits(binary.LittleEndian.Uint64(packed[i*8:])))
		if i < rows-1 {
			fmt.Print(" ")
		}
	}
	fmt.Println()
	fmt.Print(col.DumpIR())
	// Output:
	// 1 4 7 10
	// ir size=32 extent=80 lb=0 true_lb=0 true_extent=80 align=8 elem=8
	//   loop count=4 stride=24 size=32 align=8
	//     block len=8 size=8 align=8
}

// A Cursor packs a large type in fixed-size segments, as a pipelined send
// does; a segment may end inside a basic element.
func ExampleCursor() {
	v, _ := ddt.Vector(100, 3, 7, ddt.Int32)
	_ = v.Commit()
	typed := make([]byte, 100*7*4)
	pk, err := v.NewPacker(typed, 0, 1)
	if err != nil {
		panic(err)
	}
	seg := make([]byte, 500)
	for n := 0; !pk.Done(); n++ {
		k, err := pk.Next(seg)
		if err != nil {
			panic(err)
		}
		fmt.Printf("segment %d: %d bytes, stream offset now %d\n", n, k, pk.Offset())
	}
	// Output:
	// segment 0: 500 bytes, stream offset now 500
	// segment 1: 500 bytes, stream offset now 1000
	// segment 2: 200 bytes, stream offset now 1200
}

// Of derives a datatype from a Go struct, honouring its padding.
func ExampleOf() {
	type particle struct {
		ID  int32
		Pos [3]float64
		Q   float32
	}
	t, err := ddt.Of[particle]()
	if err != nil {
		panic(err)
	}
	fmt.Println("size", t.Size(), "extent", t.Extent())
	// Output: size 32 extent 40
}

// A column of float64s and a row of as many carry the same data, so their
// type signatures hash alike and a receive of one may take the other;
// int32 data does not match float32 of the same size.
func ExampleType_Signature() {
	col, _ := ddt.Vector(4, 1, 3, ddt.Float64) // one column of a 4×3 matrix
	_ = col.Commit()
	c, _ := col.Signature(1, 32)
	r, _ := ddt.Float64.Signature(4, 32)
	i, _ := ddt.Int32.Signature(8, 32)
	f, _ := ddt.Float32.Signature(8, 32)
	fmt.Println(c == r, i == f)
	// Output: true false
}

// A message of two parts (three float64s, then two int32s) carries the
// signature of its parts joined in order: the same as one struct type
// holding those elements.
func ExampleSig_Then() {
	pos, _ := ddt.Float64.SigOf(3, 24)
	ids, _ := ddt.Int32.SigOf(2, 8)
	st, _ := ddt.Struct([]int{3, 2}, []int64{0, 24}, []*ddt.Type{ddt.Float64, ddt.Int32})
	_ = st.Commit()
	whole, _ := st.SigOf(1, 32)
	fmt.Println(pos.Then(ids) == whole, pos.Then(ids).Elems)
	// Output: true 5
}

// ExampleType_Blocks tells, without walking a layout's blocks, whether
// they are large enough on average to be moved one by one rather than
// packed.
func ExampleType_Blocks() {
	col, _ := ddt.Vector(1000, 64, 100, ddt.Float64) // 1000 rows of 64 of every 100 float64s
	_ = col.Commit()
	nb, _ := col.Blocks(1)
	size, _ := col.PackSize(1)
	fmt.Println(nb, "blocks of", size/nb, "bytes on average")
	// Output: 1000 blocks of 512 bytes on average
}

// A 4×6 int32 matrix dealt out ScaLAPACK-style in 2×2 blocks over a 2×2
// process grid: process 1 (grid row 0, column 1) holds rows 0–1 of
// columns 2–3. Its type picks them out of the whole matrix.
func ExampleDarray() {
	const rows, cols = 4, 6
	cyclic := []ddt.Distribution{ddt.DistributeCyclic, ddt.DistributeCyclic}
	t, err := ddt.Darray(4, 1, []int{rows, cols}, cyclic, []int{2, 2}, []int{2, 2}, ddt.OrderC, ddt.Int32)
	if err != nil {
		panic(err)
	}
	if err := t.Commit(); err != nil {
		panic(err)
	}
	mat := make([]byte, 4*rows*cols)
	for r := range rows {
		for c := range cols {
			binary.LittleEndian.PutUint32(mat[4*(r*cols+c):], uint32(10*r+c))
		}
	}
	mine := make([]byte, t.Size())
	if _, err := t.PackRange(mine, mat, 0, 1, 0); err != nil {
		panic(err)
	}
	for i := 0; i < len(mine); i += 4 {
		fmt.Print(binary.LittleEndian.Uint32(mine[i:]), " ")
	}
	fmt.Println("of", t.Extent(), "bytes")
	// Output: 2 3 12 13 of 96 bytes
}
