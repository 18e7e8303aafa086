package launch

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"sync"
)

func itoa(n int) string { return strconv.Itoa(n) }

// startSlurm runs the whole job as one srun step; Slurm's PMI-2 server
// connects the ranks. srun's stderr is watched for its report of the first
// task that failed, so the job's error can name that rank and status.
func (j *Job) startSlurm() error {
	cmd := slurmCommand(j.cfg)
	env := append([]string{stacksEnvEntry()}, baseEnv()...)
	env = append(env, providerEnv(j.cfg)...)
	env = append(env, j.cfg.Env...)
	cmd.Env = env
	cmd.Dir = j.cfg.Dir
	j.srunWatch = &srunWatcher{w: j.out.stderr}
	j.out.stderr = j.srunWatch
	return j.spawn(-1, cmd, stdinForward, nil)
}

// srunTaskExit matches srun's "srun: error: HOST: task 1: Exited with exit
// code 3" (and "tasks 0-1: ...").
var srunTaskExit = regexp.MustCompile(`tasks? (\d+)[^:]*: Exited with exit code (\d+)`)

// srunWatcher passes srun's stderr through and remembers the first task
// failure srun reports.
type srunWatcher struct {
	w     io.Writer
	mu    sync.Mutex
	line  []byte
	rank  int
	code  int
	found bool
}

func (s *srunWatcher) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.line = append(s.line, p...)
	for {
		i := bytes.IndexByte(s.line, '\n')
		if i < 0 {
			break
		}
		if m := srunTaskExit.FindSubmatch(s.line[:i]); m != nil && !s.found {
			s.rank, _ = strconv.Atoi(string(m[1]))
			s.code, _ = strconv.Atoi(string(m[2]))
			s.found = s.code != 0
		}
		s.line = s.line[i+1:]
	}
	if len(s.line) > 4096 {
		s.line = s.line[:0]
	}
	s.mu.Unlock()
	return s.w.Write(p)
}

// failure returns the first failing task srun reported, if any.
func (s *srunWatcher) failure() (rank, code int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rank, s.code, s.found
}
