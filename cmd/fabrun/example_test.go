package main

import "os"

// fabrun's entry point, as called by main: one rank, output tagged.
func Example() {
	code := fabrun([]string{"-n", "1", "--tag-output", "echo", "hello"}, nil, os.Stdout, os.Stderr)
	if code != 0 {
		panic(code)
	}
	// Output: [0] hello
}
