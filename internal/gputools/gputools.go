// Package gputools finds and runs the GPU tool chain pieces the gpu tests
// use on machines without a GPU: ptxas, extracted from Debian non-free's
// nvidia-cuda-toolkit by deploy/install-gpu-tools.sh.
package gputools

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
)

// DefaultDir is where deploy/install-gpu-tools.sh puts the tools
// (WEFT_GPU_TOOLS overrides it for both).
const DefaultDir = "/var/cache/weft-gpu-tools"

// Ptxas returns the path of ptxas: $WEFT_GPU_TOOLS/bin/ptxas (default
// DefaultDir), else ptxas on PATH.
func Ptxas() (string, error) {
	dir := os.Getenv("WEFT_GPU_TOOLS")
	if dir == "" {
		dir = DefaultDir
	}
	if p := filepath.Join(dir, "bin", "ptxas"); isExec(p) {
		return p, nil
	}
	if p, err := exec.LookPath("ptxas"); err == nil {
		return p, nil
	}
	return "", errors.New("no ptxas in " + filepath.Join(dir, "bin") + " or PATH (deploy/install-gpu-tools.sh extracts it)")
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Func is what ptxas -v reports for one kernel.
type Func struct {
	Name        string
	Registers   int
	SpillStores int
	SpillLoads  int
	Stack       int
}

var (
	reEntry = regexp.MustCompile(`Compiling entry function '([^']+)'`)
	reFrame = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	reRegs  = regexp.MustCompile(`Used (\d+) registers`)
)

// Assemble runs ptxas -v for arch (e.g. "sm_80") on the PTX text in dir
// (a scratch directory) and returns the per-kernel report. A ptxas error
// is returned with its output.
func Assemble(ptx, arch, dir string) ([]Func, error) {
	bin, err := Ptxas()
	if err != nil {
		return nil, err
	}
	in := filepath.Join(dir, "k.ptx")
	if err := os.WriteFile(in, []byte(ptx), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-arch="+arch, "-O3", "-v", "-Werror", in, "-o", filepath.Join(dir, "k.cubin"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ptxas -arch=%s: %v:\n%s", arch, err, out.String())
	}
	var fs []Func
	for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
		if m := reEntry.FindSubmatch(line); m != nil {
			fs = append(fs, Func{Name: string(m[1])})
			continue
		}
		if len(fs) == 0 {
			continue
		}
		f := &fs[len(fs)-1]
		if m := reFrame.FindSubmatch(line); m != nil {
			f.Stack, _ = strconv.Atoi(string(m[1]))
			f.SpillStores, _ = strconv.Atoi(string(m[2]))
			f.SpillLoads, _ = strconv.Atoi(string(m[3]))
		}
		if m := reRegs.FindSubmatch(line); m != nil {
			f.Registers, _ = strconv.Atoi(string(m[1]))
		}
	}
	return fs, nil
}
