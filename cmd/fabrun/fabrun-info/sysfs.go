package main

import (
	"os"
	"path/filepath"
	"strings"
)

// sysfsRDMADevices describes each /sys/class/infiniband device with its
// network interfaces.
func sysfsRDMADevices() []string {
	ents, err := os.ReadDir("/sys/class/infiniband")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		d := e.Name()
		nets, _ := os.ReadDir(filepath.Join("/sys/class/infiniband", d, "device", "net"))
		var names []string
		for _, n := range nets {
			names = append(names, n.Name())
		}
		desc := d
		if len(names) > 0 {
			desc += " (net: " + strings.Join(names, ", ") + ")"
		}
		out = append(out, desc)
	}
	return out
}
