package launch

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// watchdogScript runs in a process of its own session that outlives the
// launcher. It reads from its standard input (a pipe only the launcher
// holds) first the job secret, then one session id per started rank; "end"
// means the job ended normally. End of input without "end" means the
// launcher died (SIGKILL, a crash, os.Exit without Wait): the script then
// kills, with SIGKILL and until none is left, every process of the ranks'
// sessions and every process whose environment carries the job's
// WEFT_PMI_SECRET (ranks' children that left the session). The secret never
// appears on a command line (grep reads its pattern from a pipe).
const watchdogScript = `
IFS= read -r secret || exit 0
sids=' '
while IFS= read -r l; do
	case $l in
	end) exit 0 ;;
	''|*[!0-9]*) ;;
	*) sids="$sids$l " ;;
	esac
done
me=$$
round=0
while [ $round -lt 200 ]; do
	found=
	for d in /proc/[0-9]*; do
		{ IFS= read -r st < "$d/stat"; } 2>/dev/null || continue
		st=${st##*)}
		set -- $st
		[ "$1" = Z ] && continue
		case $sids in *" $4 "*) kill -KILL "${d#/proc/}" 2>/dev/null && found=1 ;; esac
	done
	for f in $(printf 'WEFT_PMI_SECRET=%s\n' "$secret" | grep -lzsxF -f - /proc/[0-9]*/environ); do
		p=${f#/proc/}
		p=${p%/environ}
		[ "$p" = "$me" ] && continue
		{ IFS= read -r st < "/proc/$p/stat"; } 2>/dev/null || continue
		st=${st##*)}
		set -- $st
		[ "$1" = Z ] && continue
		kill -KILL "$p" 2>/dev/null && found=1
	done
	[ -z "$found" ] && exit 0
	round=$((round + 1))
done
`

// watchdog is the process that kills what is left of a local job when the
// launcher dies without ending it.
type watchdog struct {
	cmd *exec.Cmd
	w   *os.File
}

// startWatchdog starts the watchdog for a job with the given secret.
func startWatchdog(secret string) (*watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("launch: watchdog pipe: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript)
	cmd.Stdin = r
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	// Its own session: neither the terminal's signals nor the job's kills
	// reach it, and no Pdeathsig: it must outlive the launcher.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("launch: watchdog: %w", err)
	}
	wd := &watchdog{cmd: cmd, w: w}
	if _, err := fmt.Fprintf(w, "%s\n", secret); err != nil {
		wd.stop()
		return nil, fmt.Errorf("launch: watchdog: %w", err)
	}
	return wd, nil
}

// guard adds a rank's session to what the watchdog kills.
func (wd *watchdog) guard(sid int) {
	if _, err := fmt.Fprintf(wd.w, "%d\n", sid); err != nil {
		log.Warn("watchdog", "err", err)
	}
}

// stop tells the watchdog the job ended normally and waits for it.
func (wd *watchdog) stop() {
	fmt.Fprintln(wd.w, "end")
	wd.w.Close()
	done := make(chan struct{})
	go func() {
		wd.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		wd.cmd.Process.Kill()
		<-done
	}
}
