package launch

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// jobProcs lists the live (not zombie) processes whose process group or
// session is one of ids, read from /proc. Every started process leads its
// own session and process group (setsid), so ids are their pids; a child
// that moved to a process group of its own stays in the session.
func jobProcs(ids map[int]bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may contain spaces or ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 4 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		pg, err1 := strconv.Atoi(string(f[2]))
		sid, err2 := strconv.Atoi(string(f[3]))
		if err1 == nil && ids[pg] || err2 == nil && ids[sid] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitGroupsGone kills, for up to d, what is left in the job's process
// groups and sessions after their SIGKILL, so that when Wait returns
// nothing of the job is still running.
func (j *Job) waitGroupsGone(d time.Duration) {
	ids := map[int]bool{}
	for _, p := range j.procs {
		ids[p.pgid] = true
	}
	deadline := time.Now().Add(d)
	for {
		left := jobProcs(ids)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			log.Warn("processes of the job still alive after SIGKILL", "count", len(left))
			return
		}
		for _, pid := range left {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				log.Debug("kill", "pid", pid, "err", err)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}
