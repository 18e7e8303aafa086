package endpoint

import "testing"

// TestParseMeminfo: the memory guard of CreateEndpoints reads MemAvailable
// and MemTotal in bytes, and reports nothing it cannot read whole.
func TestParseMeminfo(t *testing.T) {
	for _, tc := range []struct {
		text         string
		avail, total uint64
		ok           bool
	}{
		{"MemTotal:       24683584 kB\nMemFree:        23987444 kB\nMemAvailable:   24140084 kB\n", 24140084 << 10, 24683584 << 10, true},
		{"MemAvailable: 10 kB\nMemTotal: 20 kB", 10 << 10, 20 << 10, true},
		{"MemTotal:       24683584 kB\nMemFree:        23987444 kB\n", 0, 0, false}, // a kernel before 3.14
		{"MemTotal: 20 MB\nMemAvailable: 10 kB\n", 0, 0, false},
		{"MemTotal: x kB\nMemAvailable: 10 kB\n", 0, 0, false},
		{"", 0, 0, false},
	} {
		a, tot, ok := parseMeminfo([]byte(tc.text))
		if a != tc.avail || tot != tc.total || ok != tc.ok {
			t.Errorf("parseMeminfo(%q) = %d, %d, %v; want %d, %d, %v", tc.text, a, tot, ok, tc.avail, tc.total, tc.ok)
		}
	}
	if a, tot, ok := memAvailable(); !ok || a == 0 || a > tot {
		t.Errorf("this machine's /proc/meminfo: available %d of %d, ok %v", a, tot, ok)
	}
}
