package jit

import (
	"strings"
)

// Features are the CPU capabilities code generation may use. They come from
// golang.org/x/sys/cpu (which also checks that the OS saves the wider
// registers) and can be narrowed with WEFT_TUNE=jitisa=sse2|avx2|avx512 to test
// or benchmark the narrower code paths on a wide machine.
type Features struct {
	AVX2   bool // 32-byte moves (vmovdqu ymm), vzeroupper on return
	AVX512 bool // 64-byte moves (vmovdqu64 zmm)
	ERMS   bool // fast rep movsb
}

// String names the widest vector ISA in use.
func (f Features) String() string {
	s := "sse2"
	switch {
	case f.AVX512:
		s = "avx512"
	case f.AVX2:
		s = "avx2"
	}
	if f.ERMS {
		s += "+erms"
	}
	return s
}

func limitISA(f Features, env string) Features {
	switch strings.ToLower(strings.TrimSpace(env)) {
	case "sse2", "sse":
		f.AVX2, f.AVX512 = false, false
	case "avx2", "avx":
		f.AVX512 = false
	}
	return f
}

var hostFeatures = limitISA(detectFeatures(), tune.JITISA)

// HostFeatures returns the features generated code uses on this machine.
func HostFeatures() Features { return hostFeatures }
