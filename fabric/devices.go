package fabric

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/Mellanox/rdmamap"
)

// Device is an RDMA device found in sysfs.
type Device struct {
	Name     string   // e.g. "mlx5_0"
	Ports    []Port   // active or not
	Netdevs  []string // network interfaces backed by the device
	PCI      string   // PCI address ("0000:3b:00.0"), "" when unknown
	NUMANode int      // -1 when unknown
	CharDevs []string // /dev/infiniband/uverbsN, ...
}

// Port is one port of an RDMA device.
type Port struct {
	Number    int
	State     string // e.g. "4: ACTIVE"
	LinkLayer string // "InfiniBand", "Ethernet"
	Rate      string
}

// sysClassIB is where RDMA devices appear (a variable for tests).
var sysClassIB = "/sys/class/infiniband"

// Devices lists the RDMA devices with their ports, network interfaces,
// PCI address and NUMA node where sysfs has them. On a machine without RDMA
// hardware it returns an empty list and no error.
func Devices() ([]Device, error) {
	names := rdmamap.GetRdmaDeviceList()
	if len(names) == 0 {
		return []Device{}, nil
	}
	netdevs := map[string][]string{}
	if ifs, err := net.Interfaces(); err == nil {
		for _, in := range ifs {
			if d, err := rdmamap.GetRdmaDeviceForNetdevice(in.Name); err == nil && d != "" {
				netdevs[d] = append(netdevs[d], in.Name)
			}
		}
	}
	out := make([]Device, 0, len(names))
	for _, n := range names {
		d := deviceFromSysfs(sysClassIB, n)
		d.Netdevs = netdevs[n]
		d.CharDevs = rdmamap.GetRdmaCharDevices(n)
		out = append(out, d)
	}
	return out, nil
}

// deviceFromSysfs reads what sysfs says about one device under root.
func deviceFromSysfs(root, name string) Device {
	d := Device{Name: name, NUMANode: -1}
	dir := filepath.Join(root, name)
	if link, err := filepath.EvalSymlinks(filepath.Join(dir, "device")); err == nil {
		base := filepath.Base(link)
		if strings.Count(base, ":") == 2 { // domain:bus:slot.fn
			d.PCI = base
		}
	}
	if s := readTrim(filepath.Join(dir, "device", "numa_node")); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v >= 0 {
			d.NUMANode = v
		}
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "ports"))
	for _, e := range ents {
		num, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pd := filepath.Join(dir, "ports", e.Name())
		d.Ports = append(d.Ports, Port{
			Number:    num,
			State:     readTrim(filepath.Join(pd, "state")),
			LinkLayer: readTrim(filepath.Join(pd, "link_layer")),
			Rate:      readTrim(filepath.Join(pd, "rate")),
		})
	}
	return d
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
