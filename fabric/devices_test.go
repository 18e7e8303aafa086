package fabric

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDevicesHere(t *testing.T) {
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	if devs == nil {
		t.Fatal("nil list")
	}
	if _, err := os.Stat(sysClassIB); err != nil && len(devs) != 0 {
		t.Errorf("no %s but %d devices", sysClassIB, len(devs))
	}
	t.Logf("%d RDMA devices: %+v", len(devs), devs)
}

func TestDeviceFromSysfs(t *testing.T) {
	root := t.TempDir()
	pci := filepath.Join(root, "pci", "0000:3b:00.0")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(pci, 0o755))
	must(os.WriteFile(filepath.Join(pci, "numa_node"), []byte("1\n"), 0o644))
	dev := filepath.Join(root, "ib", "mlx5_0")
	must(os.MkdirAll(filepath.Join(dev, "ports", "1"), 0o755))
	must(os.Symlink(pci, filepath.Join(dev, "device")))
	must(os.WriteFile(filepath.Join(dev, "ports", "1", "state"), []byte("4: ACTIVE\n"), 0o644))
	must(os.WriteFile(filepath.Join(dev, "ports", "1", "link_layer"), []byte("Ethernet\n"), 0o644))
	d := deviceFromSysfs(filepath.Join(root, "ib"), "mlx5_0")
	if d.PCI != "0000:3b:00.0" || d.NUMANode != 1 || len(d.Ports) != 1 || d.Ports[0].State != "4: ACTIVE" || d.Ports[0].LinkLayer != "Ethernet" {
		t.Errorf("%+v", d)
	}
	if d := deviceFromSysfs(filepath.Join(root, "ib"), "absent"); d.NUMANode != -1 || d.PCI != "" || len(d.Ports) != 0 {
		t.Errorf("absent device: %+v", d)
	}
}
