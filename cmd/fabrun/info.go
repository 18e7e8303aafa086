package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// info runs "fabrun info" through the fabrun-info binary (cmd/fabrun/fabrun-info),
// found via WEFT_FABRUN_INFO, next to this executable, or on PATH. fabrun
// itself does not link libfabric, which keeps its start-up fast.
func info(args []string, stdout, stderr io.Writer) int {
	prog := os.Getenv("WEFT_FABRUN_INFO")
	if prog == "" {
		if exe, err := os.Executable(); err == nil {
			if p := filepath.Join(filepath.Dir(exe), "fabrun-info"); isExecutable(p) {
				prog = p
			}
		}
	}
	if prog == "" {
		p, err := exec.LookPath("fabrun-info")
		if err != nil {
			fmt.Fprintln(stderr, "fabrun info: the fabrun-info program is not next to fabrun nor on PATH (go build -o bin/ ./cmd/...), and WEFT_FABRUN_INFO is unset")
			return 1
		}
		prog = p
	}
	cmd := exec.Command(prog, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		fmt.Fprintf(stderr, "fabrun info: %v\n", err)
		return 1
	}
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
