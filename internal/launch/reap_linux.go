package launch

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// groupsAlive counts live (not zombie) processes in the given process groups,
// read from /proc.
func groupsAlive(groups map[int]bool) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces or ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 4 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if pg, err := strconv.Atoi(string(f[2])); err == nil && groups[pg] {
			n++
		}
	}
	return n
}

// waitGroupsGone waits up to d for the job's process groups to empty after
// SIGKILL, so that when Wait returns nothing of the job is still running.
func (j *Job) waitGroupsGone(d time.Duration) {
	groups := map[int]bool{}
	for _, p := range j.procs {
		groups[p.pgid] = true
	}
	deadline := time.Now().Add(d)
	for groupsAlive(groups) > 0 {
		if time.Now().After(deadline) {
			log.Warn("processes of the job still alive after SIGKILL", "groups", len(groups))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
