package jit

// callCode calls generated code at address code with the argument block a
// (in BX). Implemented in call_amd64.s.
//
//go:noescape
func callCode(code uintptr, a *callArgs)
