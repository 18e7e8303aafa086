package main

import (
	"fmt"
	"io"
)

// printDevices lists RDMA devices. The fabric package does not offer
// fabric.Devices yet, so this reads the kernel's RDMA class directory.
func printDevices(stdout, stderr io.Writer) int {
	devs := sysfsRDMADevices()
	if len(devs) == 0 {
		fmt.Fprintln(stdout, "RDMA devices: none")
		return 0
	}
	fmt.Fprintln(stdout, "RDMA devices:")
	for _, d := range devs {
		fmt.Fprintf(stdout, "  %s\n", d)
	}
	return 0
}
