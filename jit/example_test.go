package jit_test

import (
	"fmt"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/jit"
)

// Importing jit makes every committed type pack through native code (when
// the machine allows it); nothing else changes for the caller.
func Example() {
	// Every third float64 of a 12-element array.
	col, _ := ddt.Vector(4, 1, 3, ddt.Float64)
	// Enable is already done by the import unless WEFT_JIT=off; it fails
	// with ErrUnsupported where native code cannot run (other
	// architectures, PROT_EXEC refused), and then ddt interprets.
	if jit.Enable() == nil {
		_ = col.SetJIT(ddt.JITOn) // compile at Commit (auto compiles after some use)
	}
	if err := col.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	typed := make([]byte, 12*8)
	for i := range 12 {
		typed[i*8] = byte(i)
	}
	packed := make([]byte, 4*8)
	n, err := col.Pack(packed, typed, 1)
	fmt.Println(n, err, packed[0], packed[8], packed[16], packed[24])
	// Output: 32 <nil> 0 3 6 9
}
