package launch

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// remoteWrapper first reads the job secret, the one line fabrun writes to
// the ssh client's stdin, into the rank's environment (so it never appears
// in a command line). It then runs the rank program in its own process group
// on the remote host and keeps reading stdin, the lifeline, line by line:
// "quit" sends SIGQUIT and "usr1" sends SIGUSR1 to the program, but only
// when the program catches that signal (its /proc/PID/status SigCgt mask
// says so: a Go program does, a shell or a C program would die, or dump
// core); other lines are ignored. When the lifeline reaches EOF (the local
// ssh client exited or was killed, or fabrun closed it) the wrapper kills
// the program's group. It exits with the program's status.
const remoteWrapper = `IFS= read -r WEFT_PMI_SECRET || { echo "weft-rank: no job secret on stdin" >&2; exit 125; }
export WEFT_PMI_SECRET
exec 3<&0
if command -v setsid >/dev/null 2>&1; then setsid "$@" </dev/null & else "$@" </dev/null & fi
p=$!
{
while IFS= read -r c <&3; do
case $c in quit) s=QUIT b=4;; usr1) s=USR1 b=512;; *) continue;; esac
m=$(sed -n 's/^SigCgt:[[:space:]]*//p' /proc/$p/status 2>/dev/null)
m=${m#"${m%???}"}
case $m in ???) [ $((0x$m & b)) -ne 0 ] && kill -$s $p;; esac
done
kill -TERM -$p || kill -TERM $p; sleep 1; kill -KILL -$p || kill -KILL $p; } >/dev/null 2>&1 &
w=$!
exec 3<&-
wait $p
s=$?
kill $w 2>/dev/null
kill -KILL -$p 2>/dev/null
exit $s`

// Lifeline commands: a line fabrun writes to an ssh rank's stdin after the
// job secret asks the remote wrapper to signal the rank (remoteWrapper).
const (
	lifelineQuit = "quit\n" // SIGQUIT: a Go program writes its stacks and exits
	lifelineUSR1 = "usr1\n" // SIGUSR1: a weft rank writes its stacks and carries on
)

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sshCommand builds the ssh client command that runs one rank on host. The
// rank's environment travels in the remote command line ("env K=V ...")
// because sshd does not accept arbitrary variables; the job secret does not
// (it goes through stdin, see remoteWrapper), as command lines are readable
// by every user of both machines.
func sshCommand(cfg Config, host string, argv, env, rankEnv []string) *exec.Cmd {
	words := []string{"cd", shellQuote(cfg.Dir), "2>/dev/null;", "exec", "env"}
	for _, kv := range append(append([]string{stacksEnvEntry()}, env...), rankEnv...) {
		words = append(words, shellQuote(kv))
	}
	words = append(words, "sh", "-c", shellQuote(remoteWrapper), "weft-rank")
	for _, a := range argv {
		words = append(words, shellQuote(a))
	}
	args := append(append([]string{}, cfg.SSH[1:]...), "-o", "BatchMode=yes", host, strings.Join(words, " "))
	return exec.Command(cfg.SSH[0], args...)
}

// slurmCommand builds the srun command line for the slurm launcher.
func slurmCommand(cfg Config) *exec.Cmd {
	args := append([]string{}, cfg.Srun[1:]...)
	// --label (unless the tasks write files of their own): the output
	// copier drops the labels unless the output is tagged, which a stack
	// dump turns on while the job runs.
	args = append(args, "--mpi=pmi2", "--kill-on-bad-exit=1", "--input=0", "-n", itoa(cfg.NP))
	if cfg.OutputDir != "" {
		// Each task's output in its own files, as the other launchers
		// write them; srun's own messages stay on its stderr.
		name := filepath.Join(cfg.OutputDir, "rank.%t")
		args = append(args, "--output="+name+".out", "--error="+name+".err")
	} else {
		args = append(args, "--label")
	}
	args = append(args, "--")
	if len(cfg.Apps) > 1 {
		// MPMD: every task runs a shell that picks its app by its rank
		// and execs the app's program with the app's environment.
		args = append(args, "sh", "-c", mpmdScript(cfg.Apps), "weft-mpmd")
	} else {
		args = append(args, cfg.Apps[0].Argv...)
	}
	return exec.Command(cfg.Srun[0], args...)
}

// mpmdScript is the shell program an MPMD job's Slurm tasks run: the task
// of rank SLURM_PROCID execs its app's program through env, which sets
// WEFT_APPNUM and the app's variables.
func mpmdScript(apps []App) string {
	var b strings.Builder
	end := 0
	for i, a := range apps {
		end += a.NP
		kw := "elif"
		if i == 0 {
			kw = "if"
		}
		fmt.Fprintf(&b, "%s [ \"$SLURM_PROCID\" -lt %d ]; then exec env WEFT_APPNUM=%d", kw, end, i)
		for _, w := range append(append([]string{}, a.Env...), a.Argv...) {
			b.WriteString(" " + shellQuote(w))
		}
		b.WriteString("; ")
	}
	b.WriteString("fi; exit 127")
	return b.String()
}
