package launch

import (
	"strconv"
)

func itoa(n int) string { return strconv.Itoa(n) }

// startSlurm runs the whole job as one srun step; Slurm's PMI-2 server
// connects the ranks.
func (j *Job) startSlurm() error {
	cmd := slurmCommand(j.cfg)
	env := baseEnv()
	env = append(env, providerEnv(j.cfg)...)
	env = append(env, j.cfg.Env...)
	cmd.Env = env
	cmd.Dir = j.cfg.Dir
	return j.spawn(-1, cmd, true)
}
