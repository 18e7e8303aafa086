package onesided

import "syscall"

func syscallMunmap(b []byte) error { return syscall.Munmap(b) }
