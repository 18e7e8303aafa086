//go:build !amd64

package jit

func detectFeatures() Features { return Features{} }
