package main

import (
	"os/exec"
	"testing"
)

// BenchmarkStartup measures whole jobs of 4 ranks: /bin/true (launcher
// start, fork/exec, supervision, teardown) and examples/hello (plus PMI
// bootstrap, fabric setup, address exchange and a ring). Sub-benchmarks run
// fabrun and MPICH's mpiexec.hydra side by side.
func BenchmarkStartup(b *testing.B) {
	fab, hello := binaries(b)
	cases := []struct {
		name string
		argv []string
	}{
		{"fabrun-true", []string{fab, "-n", "4", "true"}},
		{"fabrun-hello", []string{fab, "-n", "4", "--provider", "shm", hello}},
	}
	if hydra, err := exec.LookPath("mpiexec.hydra"); err == nil {
		cases = append(cases, struct {
			name string
			argv []string
		}{"hydra-true", []string{hydra, "-launcher", "fork", "-n", "4", "true"}})
		cases = append(cases, struct {
			name string
			argv []string
		}{"hydra-hello", []string{hydra, "-launcher", "fork", "-n", "4", "-env", "WEFT_PROVIDER", "shm", hello}})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if out, err := exec.Command(c.argv[0], c.argv[1:]...).CombinedOutput(); err != nil {
					b.Fatalf("%v: %v\n%s", c.argv, err, out)
				}
			}
		})
	}
}
