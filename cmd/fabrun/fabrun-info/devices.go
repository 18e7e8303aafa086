package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/weft-hpc/weft/fabric"
)

// printDevices lists the RDMA devices (fabric.Devices) with their ports,
// network interfaces, PCI address and NUMA node.
func printDevices(stdout, stderr io.Writer) int {
	devs, err := fabric.Devices()
	if err != nil {
		fmt.Fprintf(stderr, "fabrun info: RDMA devices: %v\n", err)
		return 1
	}
	if len(devs) == 0 {
		fmt.Fprintln(stdout, "RDMA devices: none")
		return 0
	}
	fmt.Fprintln(stdout, "RDMA devices:")
	for _, d := range devs {
		fmt.Fprintf(stdout, "  %s", d.Name)
		if len(d.Netdevs) > 0 {
			fmt.Fprintf(stdout, " net=%s", strings.Join(d.Netdevs, ","))
		}
		if d.PCI != "" {
			fmt.Fprintf(stdout, " pci=%s", d.PCI)
		}
		if d.NUMANode >= 0 {
			fmt.Fprintf(stdout, " numa=%d", d.NUMANode)
		}
		fmt.Fprintln(stdout)
		for _, p := range d.Ports {
			fmt.Fprintf(stdout, "    port %d: %s %s %s\n", p.Number, p.State, p.LinkLayer, p.Rate)
		}
	}
	return 0
}
