package jit

import "golang.org/x/sys/cpu"

func detectFeatures() Features {
	return Features{
		AVX2:   cpu.X86.HasAVX2,
		AVX512: cpu.X86.HasAVX512F,
		ERMS:   cpu.X86.HasERMS,
	}
}
