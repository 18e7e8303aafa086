// Command fabrun starts a weft program as a parallel job.
//
//	fabrun -n N [--hosts h1:slots,h2 | --hostfile F] [--launcher auto|local|ssh|slurm]
//	       [--provider P] [--timeout D] [--env K=V]... [--tag-output] prog [args]
//	       [: -n N2 [--env K=V]... prog2 [args] ...]
//	fabrun info [--provider P]
//
// Programs separated by ":" make one MPMD job: prog's N ranks first, then
// prog2's N2, each rank told its program's index (WEFT_APPNUM, PMI's
// appnum; job.AppNum). Each later program takes its own -n and --env
// (added to the global --env for its ranks).
//
// By default the N ranks are forked on this machine. With hosts that are not
// this machine they are started over ssh and connect back to fabrun's PMI
// server; inside a Slurm allocation (SLURM_JOB_ID set) fabrun launches them
// with "srun --mpi=pmi2", as mpirun does. Ranks learn their rank, size and
// peers through internal/bootstrap.
//
// Local ranks reach fabrun's PMI-1 server through a private socketpair
// (PMI_FD, which MPICH programs understand too); ssh ranks dial its TCP port,
// which accepts only this job's ranks: each gets a random job secret in
// WEFT_PMI_SECRET (ssh ranks receive it on stdin, never in a command line).
// With --tag-output every output line is prefixed "[rank] ". Standard input
// goes to rank 0. SIGINT, SIGTERM and SIGHUP are forwarded to every rank;
// ranks still alive after the kill grace get SIGKILL (the third signal kills
// them at once). When a rank exits non-zero, dies, calls abort, or spoke PMI
// and exits without PMI finalize, the other ranks get SIGTERM and, after the
// kill grace, SIGKILL; fabrun prints which rank failed and exits with its
// status (128+signal for a signal, 1 for a missing finalize). --timeout ends
// the job the same way with status 124, after asking the ranks for their
// goroutine stacks (SIGQUIT to each rank process that catches it, as every
// Go program does, through the remote wrapper for ssh ranks; SIGUSR1 through
// srun under Slurm; --timeout-stacks=false skips this). SIGUSR1 to fabrun
// asks weft ranks for their stacks without ending the job.
// From a stack request on, output lines are tagged "[rank] ". Usage errors
// exit with status 2.
//
// Every flag has an environment variable, used when the flag is not given:
//
//	-n, -np        WEFT_NP          number of ranks
//	--hosts        WEFT_HOSTS       host[:slots],... (slots default 1)
//	--hostfile     WEFT_HOSTFILE    one "host", "host:N" or "host slots=N" per line, # comments
//	--launcher     WEFT_LAUNCHER    auto (default), local, ssh, slurm
//	--provider     WEFT_PROVIDER    libfabric provider for the ranks (exported to them)
//	--timeout      WEFT_TIMEOUT     job time limit, e.g. 90s (0: none)
//	--timeout-stacks WEFT_TIMEOUT_STACKS  on timeout, ranks dump their goroutine stacks first (default true)
//	--tag-output   WEFT_TAG_OUTPUT  prefix output lines with "[rank] "
//	--kill-grace   WEFT_KILL_GRACE  SIGTERM to SIGKILL delay (default 500ms)
//	--bind         WEFT_BIND        local ranks' CPUs: auto (default: an equal share each when they fit, GOMAXPROCS=1 each when they do not), core (one each), none
//	--ssh          WEFT_SSH         ssh command and options (default "ssh")
//	--pmi-host     WEFT_PMI_HOST    address ssh ranks use to reach fabrun (and fabrun listens on)
//	--srun         WEFT_SRUN        srun command and options (default "srun")
//	--env K=V      (repeatable)     extra environment for every rank
//	--ppn          WEFT_PPN         ranks per host, in place of the hosts' slots (under Slurm: --ntasks-per-node)
//	--wdir         WEFT_WDIR        the ranks' working directory (default: fabrun's)
//	--output-dir   WEFT_OUTPUT_DIR  each rank's stdout and stderr in DIR/rank.N.out and .err
//	(fabrun info)  WEFT_FABRUN_INFO the fabrun-info program (default: next to fabrun, then PATH)
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weft-hpc/weft/internal/launch"
)

func main() {
	os.Exit(fabrun(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// envList collects repeated --env K=V flags.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}

// options are the parsed command line.
type options struct {
	np        int
	hosts     string
	hostfile  string
	launcher  string
	provider  string
	timeout   time.Duration
	stacks    bool // --timeout-stacks
	tag       bool
	killGrace time.Duration
	ssh       string
	pmiHost   string
	srun      string
	bind      string
	env       envList
	ppn       int    // ranks per host (0: the hosts' slots)
	wdir      string // the ranks' working directory
	outDir    string // each rank's output in files there
	stats     bool   // --stats: report the ranks' point-to-point traffic
	argv      []string
	npSet     bool         // -n, -np or WEFT_NP was given (so 0 is an error, not "derive it")
	more      []launch.App // the programs after the first of an MPMD job
}

const usageText = `usage: fabrun -n N [--hosts h1:slots,h2 | --hostfile F] [--launcher auto|local|ssh|slurm]
              [--provider P] [--timeout D] [--bind auto|core|none] [--env K=V]... [--tag-output] prog [args]
              [: -n N2 [--env K=V]... prog2 [args] ...]
       fabrun info [--provider P]
       fabrun stats [--csv FILE] DIR
`

// parse reads flags, with WEFT_* environment variables as defaults.
func parse(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{launcher: "auto", bind: "auto", killGrace: 500 * time.Millisecond, ssh: "ssh", srun: "srun", stacks: true}
	fs := flag.NewFlagSet("fabrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	// Environment defaults.
	var envErr error
	envStr := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	envInt := func(name string, dst *int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q is not an integer", name, v)
			}
			*dst = n
		}
	}
	envDur := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q is not a duration (e.g. 30s): %v", name, v, err)
			}
			*dst = d
		}
	}
	envInt("WEFT_NP", &o.np)
	o.npSet = getenv("WEFT_NP") != ""
	envStr("WEFT_HOSTS", &o.hosts)
	envStr("WEFT_HOSTFILE", &o.hostfile)
	envStr("WEFT_LAUNCHER", &o.launcher)
	envStr("WEFT_PROVIDER", &o.provider)
	envDur("WEFT_TIMEOUT", &o.timeout)
	envDur("WEFT_KILL_GRACE", &o.killGrace)
	envStr("WEFT_SSH", &o.ssh)
	envStr("WEFT_PMI_HOST", &o.pmiHost)
	envStr("WEFT_SRUN", &o.srun)
	envStr("WEFT_BIND", &o.bind)
	envInt("WEFT_PPN", &o.ppn)
	envStr("WEFT_WDIR", &o.wdir)
	envStr("WEFT_OUTPUT_DIR", &o.outDir)
	envBool := func(name string, dst *bool) {
		if v := getenv(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q is not a boolean", name, v)
			}
			*dst = b
		}
	}
	envBool("WEFT_TAG_OUTPUT", &o.tag)
	envBool("WEFT_TIMEOUT_STACKS", &o.stacks)
	if envErr != nil {
		return nil, envErr
	}

	fs.IntVar(&o.np, "n", o.np, "number of ranks (WEFT_NP)")
	fs.IntVar(&o.np, "np", o.np, "same as -n")
	fs.StringVar(&o.hosts, "hosts", o.hosts, "comma-separated host[:slots] list (WEFT_HOSTS)")
	fs.StringVar(&o.hostfile, "hostfile", o.hostfile, "file with one host[:slots] per line (WEFT_HOSTFILE)")
	fs.StringVar(&o.launcher, "launcher", o.launcher, "auto, local, ssh or slurm (WEFT_LAUNCHER)")
	fs.StringVar(&o.provider, "provider", o.provider, "libfabric provider for the ranks (WEFT_PROVIDER)")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "end the job after this long, 0 for never (WEFT_TIMEOUT)")
	fs.BoolVar(&o.stacks, "timeout-stacks", o.stacks, "on timeout, ask local ranks for their goroutine stacks (SIGQUIT) before ending them (WEFT_TIMEOUT_STACKS)")
	fs.BoolVar(&o.tag, "tag-output", o.tag, `prefix every output line with "[rank] " (WEFT_TAG_OUTPUT)`)
	fs.DurationVar(&o.killGrace, "kill-grace", o.killGrace, "delay between SIGTERM and SIGKILL when ending ranks (WEFT_KILL_GRACE)")
	fs.StringVar(&o.ssh, "ssh", o.ssh, "ssh command and options (WEFT_SSH)")
	fs.StringVar(&o.pmiHost, "pmi-host", o.pmiHost, "address remote ranks use to reach fabrun (WEFT_PMI_HOST)")
	fs.StringVar(&o.srun, "srun", o.srun, "srun command and options (WEFT_SRUN)")
	fs.StringVar(&o.bind, "bind", o.bind, "local ranks' CPUs: auto (an equal share each when 2 or more fit, GOMAXPROCS=1 each when they outnumber the CPUs), core (one each) or none (WEFT_BIND)")
	fs.Var(&o.env, "env", "KEY=VALUE for every rank (repeatable)")
	fs.IntVar(&o.ppn, "ppn", o.ppn, "ranks per host, in place of the hosts' slots (with --hosts or --hostfile; under Slurm, srun's --ntasks-per-node) (WEFT_PPN)")
	fs.StringVar(&o.wdir, "wdir", o.wdir, "the ranks' working directory (default: fabrun's) (WEFT_WDIR)")
	fs.StringVar(&o.outDir, "output-dir", o.outDir, "write each rank's stdout and stderr to DIR/rank.N.out and DIR/rank.N.err instead of fabrun's (WEFT_OUTPUT_DIR)")
	fs.BoolVar(&o.stats, "stats", o.stats, "count the ranks' point-to-point traffic (WEFT_STATS set to a directory of fabrun's) and report it per rank and pair when the job ends")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.argv = fs.Args()
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "n" || f.Name == "np" {
			o.npSet = true
		}
	})
	// MPMD: "prog args : -n N2 --env K=V prog2 args : ...".
	segs := splitApps(o.argv)
	o.argv = segs[0]
	for i, seg := range segs[1:] {
		app, err := parseApp(seg, stderr)
		if err != nil {
			return nil, fmt.Errorf("program %d after ':': %w", i+2, err)
		}
		o.more = append(o.more, app)
	}
	return o, nil
}

// splitApps cuts argv at every ":" word.
func splitApps(argv []string) [][]string {
	segs := [][]string{nil}
	for _, a := range argv {
		if a == ":" {
			segs = append(segs, nil)
			continue
		}
		segs[len(segs)-1] = append(segs[len(segs)-1], a)
	}
	return segs
}

// parseApp reads one MPMD program after a ":": its -n (required) and
// --env flags, then the program and its arguments.
func parseApp(args []string, stderr io.Writer) (launch.App, error) {
	var app launch.App
	var env envList
	fs := flag.NewFlagSet("fabrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&app.NP, "n", 0, "number of ranks")
	fs.IntVar(&app.NP, "np", 0, "same as -n")
	fs.Var(&env, "env", "KEY=VALUE for this program's ranks (repeatable)")
	if err := fs.Parse(args); err != nil {
		return app, err
	}
	if app.NP <= 0 {
		return app, fmt.Errorf("the number of ranks must be positive (-n N), got %d", app.NP)
	}
	if app.Argv = fs.Args(); len(app.Argv) == 0 {
		return app, errors.New("no program given")
	}
	app.Env = env
	return app, nil
}

// parseHosts reads "h1:2,h2" into hosts.
func parseHosts(s string) ([]launch.Host, error) {
	var hosts []launch.Host
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		h, err := parseHost(item)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

func parseHost(item string) (launch.Host, error) {
	name, slots := item, 1
	if i := strings.LastIndexByte(item, ':'); i >= 0 && !strings.Contains(item[i:], "]") {
		n, err := strconv.Atoi(item[i+1:])
		if err != nil || n <= 0 {
			return launch.Host{}, fmt.Errorf("host %q: slots must be a positive integer", item)
		}
		name, slots = item[:i], n
	}
	name = strings.Trim(name, "[]")
	if name == "" {
		return launch.Host{}, fmt.Errorf("host %q: empty name", item)
	}
	return launch.Host{Name: name, Slots: slots}, nil
}

// readHostfile parses lines "host", "host:N" or "host slots=N".
func readHostfile(path string) ([]launch.Host, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hosts []launch.Host
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		h, err := parseHost(fields[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, ln, err)
		}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			if k != "slots" && k != "max_slots" {
				return nil, fmt.Errorf("%s:%d: unknown field %q", path, ln, f)
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("%s:%d: slots must be a positive integer", path, ln)
			}
			if k == "slots" {
				h.Slots = n
			}
		}
		hosts = append(hosts, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s: no hosts", path)
	}
	return hosts, nil
}

// config turns options into a launch.Config.
func (o *options) config(getenv func(string) string) (launch.Config, error) {
	var cfg launch.Config
	if o.hosts != "" && o.hostfile != "" {
		return cfg, errors.New("give --hosts or --hostfile, not both")
	}
	var hosts []launch.Host
	var err error
	switch {
	case o.hosts != "":
		hosts, err = parseHosts(o.hosts)
	case o.hostfile != "":
		hosts, err = readHostfile(o.hostfile)
	}
	if err != nil {
		return cfg, err
	}
	srun := strings.Fields(o.srun)
	switch {
	case o.ppn < 0:
		return cfg, fmt.Errorf("--ppn must be positive, got %d", o.ppn)
	case o.ppn > 0 && len(hosts) > 0:
		for i := range hosts {
			hosts[i].Slots = o.ppn
		}
	case o.ppn > 0 && getenv("SLURM_JOB_ID") != "" && (o.launcher == "auto" || o.launcher == "slurm"):
		srun = append(srun, "--ntasks-per-node="+strconv.Itoa(o.ppn))
	case o.ppn > 0:
		return cfg, errors.New("--ppn needs hosts (--hosts, --hostfile) or a Slurm allocation")
	}
	np := o.np
	if !o.npSet && len(o.more) > 0 {
		return cfg, errors.New("the first program of an MPMD job needs its -n")
	}
	if !o.npSet {
		for _, h := range hosts {
			np += h.Slots
		}
		if np == 0 {
			if n, err := strconv.Atoi(getenv("SLURM_NTASKS")); err == nil {
				np = n
			}
		}
	}
	if np <= 0 {
		return cfg, fmt.Errorf("the number of ranks must be positive (-n N), got %d", np)
	}
	if len(o.argv) == 0 {
		return cfg, errors.New("no program given")
	}
	ssh := strings.Fields(o.ssh)
	if len(ssh) == 0 || len(srun) == 0 {
		return cfg, errors.New("--ssh and --srun must name a command")
	}
	if o.killGrace <= 0 {
		return cfg, fmt.Errorf("--kill-grace must be positive, got %v", o.killGrace)
	}
	if o.timeout < 0 {
		return cfg, fmt.Errorf("--timeout must not be negative, got %v", o.timeout)
	}
	cfg = launch.Config{
		NP: np, Argv: o.argv, Env: o.env, Launcher: o.launcher, Hosts: hosts,
		Provider: o.provider, Timeout: o.timeout, TimeoutStacks: o.stacks, TagOutput: o.tag, KillGrace: o.killGrace,
		SSH: ssh, PMIHost: o.pmiHost, Srun: srun, Bind: o.bind, Dir: o.wdir, OutputDir: o.outDir,
	}
	if len(o.more) > 0 {
		cfg.Apps = append([]launch.App{{NP: np, Argv: o.argv}}, o.more...)
	}
	return cfg, nil
}

// fabrun runs the command line and returns the exit status.
func fabrun(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "info" {
		return info(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "stats" {
		return stats(args[1:], stdout, stderr)
	}
	o, err := parse(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fabrun: %v\n", err)
		return 2
	}
	cfg, err := o.config(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "fabrun: %v\n%s", err, usageText)
		return 2
	}
	cfg.Stdin, cfg.Stdout, cfg.Stderr = stdin, stdout, stderr
	if o.stats {
		dir, err := os.MkdirTemp("", "weft-stats-")
		if err != nil {
			fmt.Fprintf(stderr, "fabrun: --stats: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		cfg.Env = append(cfg.Env, "WEFT_STATS="+dir)
		defer func() {
			if js, err := readStats(dir); err != nil {
				fmt.Fprintf(stderr, "fabrun: --stats: %v\n", err)
			} else {
				js.report(stderr)
			}
		}()
	}

	// Catch signals before any rank exists, so none can kill fabrun and
	// orphan the job; they are forwarded once the job runs. SIGUSR1 asks
	// the ranks for their stacks.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	ctx := context.Background()
	job, err := launch.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "fabrun: %v\n", err)
		switch {
		case errors.Is(err, launch.ErrUsage):
			return 2
		case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission):
			return 127
		}
		return 1
	}
	go func() {
		n := 0
		for sig := range sigs {
			if sig == syscall.SIGUSR1 {
				if job.DumpStacks() == 0 {
					fmt.Fprintln(stderr, "fabrun: SIGUSR1: no rank was asked for its stacks (no local rank process catches SIGUSR1, or every rank has ended)")
				}
				continue
			}
			n++
			if n >= 3 {
				sig = syscall.SIGKILL
			}
			job.Signal(sig)
		}
	}()
	err = job.Wait()
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "fabrun: %v\n", err)
	var ee *launch.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 1
}
