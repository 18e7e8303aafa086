// Package launch starts and supervises the ranks of a weft job: it is the
// engine behind cmd/fabrun and internal/launchtest.
//
// A Job runs Config.NP copies of a program. Ranks find each other through
// weft's PMI-1 server (internal/pmi). A local rank gets a private Unix
// socketpair as PMI_FD=3 (what MPICH's own PMI client expects too, so MPICH
// programs run under fabrun); an ssh rank dials PMI_PORT with PMI_ID and the
// job secret. Every rank gets PMI_RANK, PMI_SIZE, WEFT_LOCAL_RANK,
// WEFT_LOCAL_SIZE and a random per-job WEFT_PMI_SECRET (ssh ranks read it
// from stdin, so it is in no command line); the TCP server refuses any
// connection that does not present the secret, and listens only on the
// address that routes to the remote hosts (Config.PMIHost's when set).
//
// Three ways to start ranks:
//
//   - "local": fork/exec on this machine. Each rank leads its own session
//     and process group (setsid, no controlling terminal) and gets SIGKILL
//     if the launcher dies (Pdeathsig); a watchdog process then kills what
//     the ranks started (watchdog.go).
//   - "ssh": one ssh client per rank; the remote side runs the program under
//     a small sh wrapper that kills it (and its process group) when the ssh
//     connection drops, so killing the local ssh client ends the remote rank.
//     Remote ranks connect back to the PMI server (Config.PMIHost).
//   - "slurm": inside an allocation, one "srun --mpi=pmi2" step; ranks then
//     use Slurm's own PMI-2 server (bootstrap kind "slurm").
//
// Supervision: when a rank exits non-zero, dies from a signal, calls PMI
// abort, spoke PMI and exits (or drops its PMI connection) without PMI
// finalize, or never spoke PMI but leaves while others wait in a fence,
// every other rank is sent SIGTERM and, KillGrace later (default 500 ms),
// SIGKILL; Wait then returns an *ExitError naming the rank. Ranks that never
// speak PMI (plain programs) may exit 0 as they like. A Timeout ends the job
// the same way (ErrTimeout), after asking local ranks for their goroutine
// stacks when Config.TimeoutStacks is set; Job.DumpStacks asks for them
// without ending the job (stacks.go). A forwarded SIGHUP, SIGINT, SIGQUIT or SIGTERM
// is followed by SIGKILL KillGrace later. After the ranks exit, their process
// groups and sessions are swept with SIGKILL so nothing is left behind.
//
// Output: each rank's stdout and stderr go to Config.Stdout and
// Config.Stderr; with TagOutput every line is prefixed "[rank] ". Config.Stdin
// feeds rank 0 (local launcher) and other ranks read /dev/null.
package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weft-hpc/weft/internal/nodeseg"
	"github.com/weft-hpc/weft/internal/pmi"
	"github.com/weft-hpc/weft/internal/wlog"
)

var log = wlog.Named("launch")

// Host is a machine and how many ranks it takes (Slots > 0).
type Host struct {
	Name  string
	Slots int
}

// App is one program of a job of several (MPMD: "fabrun -n 1 a : -n 4
// b"): its ranks follow those of the apps before it.
type App struct {
	NP   int      // its ranks (> 0)
	Argv []string // program and arguments
	Env  []string // KEY=VALUE for its ranks, after Config.Env
}

// Config describes one job.
type Config struct {
	NP   int      // number of ranks (> 0)
	Argv []string // program and its arguments
	// Apps, when set, makes the job MPMD: each app runs its own program on
	// its own ranks, numbered app after app, and each rank learns its
	// app's index (WEFT_APPNUM, and PMI's appnum). NP and Argv are then
	// ignored. Start sets Apps to the one app of NP and Argv when empty,
	// and NP to the apps' total.
	Apps     []App
	Env      []string // extra KEY=VALUE for every rank
	Launcher string   // "auto" (default), "local", "ssh" or "slurm"
	Hosts    []Host   // hosts for "ssh" (and "auto"); ranks fill each host's slots in order, wrapping around
	Provider string   // when set, exported to ranks as WEFT_PROVIDER
	Timeout  time.Duration
	// TimeoutStacks: when the Timeout passes, local ranks are first asked
	// for their goroutine stacks (SIGQUIT to each of their processes that
	// catches it, as every Go program does) and given up to a second, or
	// KillGrace when longer, to write them and exit before the job is
	// ended. Their output is tagged from then on.
	TimeoutStacks bool
	// FailStacks: when a rank fails, the local ranks still running are
	// asked for their stacks the same way before the job is ended, so that
	// a rank that waits on the failed one shows where it waits.
	FailStacks bool
	TagOutput  bool
	// OutputDir, when set, receives each rank's output in files of its
	// own, OutputDir/rank.N.out and rank.N.err (created, truncated; the
	// directory made if missing), in place of Stdout and Stderr.
	OutputDir string
	Stdout    io.Writer     // default os.Stdout
	Stderr    io.Writer     // default os.Stderr
	Stdin     io.Reader     // to rank 0; nil means /dev/null
	KillGrace time.Duration // SIGTERM→SIGKILL delay, default 500 ms
	SSH       []string      // ssh command and options, default ["ssh"]
	PMIHost   string        // address remote ranks use to reach the PMI server, which listens on what it resolves to
	Dir       string        // working directory of the ranks (default: the current one)
	Srun      []string      // srun command and extra options, default ["srun"]
	// Bind: how local ranks are bound to CPUs (bind.go): BindAuto (the
	// default, for ""), BindCore or BindNone. Only the local launcher
	// binds; ssh ranks and Slurm's steps run as their hosts place them.
	Bind string
}

// ErrTimeout is wrapped by the ExitError of a job that ran past its Timeout.
var ErrTimeout = errors.New("launch: job timed out")

// ErrUsage is wrapped by configuration errors.
var ErrUsage = errors.New("launch: invalid configuration")

// ExitError reports why a job failed.
type ExitError struct {
	Rank   int            // the rank that failed first, or -1 for the whole job
	Code   int            // the exit status a launcher should return
	Signal syscall.Signal // the signal that killed the rank, if any
	Reason string         // e.g. "exited with status 3"
	Err    error          // ErrTimeout, or nil
}

// Error describes the failure, e.g. "rank 1 exited with status 3".
func (e *ExitError) Error() string {
	if e.Rank < 0 {
		return e.Reason
	}
	return fmt.Sprintf("rank %d %s", e.Rank, e.Reason)
}

// Unwrap returns ErrTimeout for timeouts.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the status a launcher should exit with.
func (e *ExitError) ExitCode() int { return e.Code }

// Run starts the job and waits for it.
func Run(ctx context.Context, cfg Config) error {
	j, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	return j.Wait()
}

// rank is one started process (a rank, an ssh client or the srun step).
type proc struct {
	id    int // rank, or -1 for srun
	cmd   *exec.Cmd
	pgid  int
	done  bool
	state *os.ProcessState
}

type event struct {
	p     *proc
	state *os.ProcessState
	err   error
}

// Job is a running job. Create it with Start.
type Job struct {
	cfg       Config
	launcher  string
	srv       *pmi.Server
	procs     []*proc
	events    chan event
	fail      chan *ExitError
	sigs      chan os.Signal
	waitOnce  sync.Once
	result    error
	out       *outputs
	cancel    context.CancelFunc
	ctx       context.Context
	srunWatch *srunWatcher
	lifelines []*os.File // write ends of ssh ranks' stdin
	wd        *watchdog  // local jobs: kills the job if the launcher dies
	secret    string     // the job secret
	pmiAddrs  []string   // where the PMI server listens (ssh jobs)
}

func (c *Config) validate() error {
	// One program is an MPMD job of one app: the rest of the launcher
	// knows only Apps (and NP, their ranks' total).
	if len(c.Apps) == 0 {
		c.Apps = []App{{NP: c.NP, Argv: c.Argv}}
	}
	c.NP = 0
	for i, a := range c.Apps {
		app := ""
		if len(c.Apps) > 1 {
			app = fmt.Sprintf("app %d: ", i)
		}
		if a.NP <= 0 {
			return fmt.Errorf("%w: %snumber of ranks must be positive, got %d", ErrUsage, app, a.NP)
		}
		if len(a.Argv) == 0 || a.Argv[0] == "" {
			return fmt.Errorf("%w: %sno program to run", ErrUsage, app)
		}
		if err := checkEnv(a.Env); err != nil {
			return err
		}
		c.NP += a.NP
	}
	if err := checkEnv(c.Env); err != nil {
		return err
	}
	for _, h := range c.Hosts {
		if h.Name == "" || h.Slots <= 0 {
			return fmt.Errorf("%w: host %q with %d slots", ErrUsage, h.Name, h.Slots)
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("%w: negative timeout %v", ErrUsage, c.Timeout)
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	if c.KillGrace <= 0 {
		c.KillGrace = 500 * time.Millisecond
	}
	var err error
	if c.Bind, err = checkBind(c.Bind); err != nil {
		return err
	}
	if len(c.SSH) == 0 {
		c.SSH = []string{"ssh"}
	}
	if len(c.Srun) == 0 {
		c.Srun = []string{"srun"}
	}
	if c.OutputDir != "" {
		dir, err := filepath.Abs(c.OutputDir)
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err != nil {
			return fmt.Errorf("%w: output directory: %v", ErrUsage, err)
		}
		c.OutputDir = dir
	}
	if c.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("launch: working directory: %w", err)
		}
		c.Dir = wd
	}
	return nil
}

// checkEnv reports an entry of env that is not KEY=VALUE.
func checkEnv(env []string) error {
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("%w: environment entry %q is not KEY=VALUE", ErrUsage, kv)
		}
	}
	return nil
}

// appOf returns, per rank, the index of its app.
func (c *Config) appOf() []int {
	out := make([]int, 0, c.NP)
	for i, a := range c.Apps {
		for range a.NP {
			out = append(out, i)
		}
	}
	return out
}

// ChooseLauncher resolves "auto" (or "") to "slurm" inside a Slurm allocation
// when no hosts are given, "ssh" when a host is not this machine, else
// "local". Other names are checked and returned.
func ChooseLauncher(name string, hosts []Host, getenv func(string) string) (string, error) {
	switch name {
	case "local", "ssh", "slurm":
		if name == "ssh" && len(hosts) == 0 {
			return "", fmt.Errorf("%w: the ssh launcher needs --hosts or --hostfile", ErrUsage)
		}
		return name, nil
	case "", "auto":
	default:
		return "", fmt.Errorf("%w: unknown launcher %q (want auto, local, ssh or slurm)", ErrUsage, name)
	}
	if len(hosts) == 0 {
		if getenv("SLURM_JOB_ID") != "" || getenv("SLURM_JOBID") != "" {
			return "slurm", nil
		}
		return "local", nil
	}
	for _, h := range hosts {
		if !isLocalHost(h.Name) {
			return "ssh", nil
		}
	}
	return "local", nil
}

func isLocalHost(name string) bool {
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		return false // user@host always goes through ssh
	}
	if name == "localhost" || strings.HasPrefix(name, "127.") || name == "::1" {
		return true
	}
	h, err := os.Hostname()
	return err == nil && (name == h || strings.SplitN(h, ".", 2)[0] == name)
}

// placement maps ranks to hosts: node index, local rank and local size of
// each rank, and the MPICH-style process mapping.
func placement(np int, hosts []Host) (node, lrank, lsize []int, mapping string) {
	if len(hosts) == 0 {
		hosts = []Host{{Name: "localhost", Slots: np}}
	}
	node, lrank, lsize = make([]int, np), make([]int, np), make([]int, np)
	count := make([]int, len(hosts))
	r := 0
	for r < np {
		for i, h := range hosts {
			for s := 0; s < h.Slots && r < np; s++ {
				node[r], lrank[r] = i, count[i]
				count[i]++
				r++
			}
		}
	}
	for r := range np {
		lsize[r] = count[node[r]]
	}
	// One (node,1,ranks) block per run of consecutive ranks on one node.
	var b strings.Builder
	b.WriteString("(vector")
	for start := 0; start < np; {
		end := start
		for end < np && node[end] == node[start] {
			end++
		}
		fmt.Fprintf(&b, ",(%d,1,%d)", node[start], end-start)
		start = end
	}
	b.WriteString(")")
	return node, lrank, lsize, b.String()
}

// baseEnv is the launcher's environment minus variables that would confuse
// a rank's bootstrap (an outer launcher's PMI connection).
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "PMIX_") || strings.HasPrefix(k, "MPI_LOCAL") ||
			k == "WEFT_PMI" || k == "WEFT_PMI_SECRET" || k == "WEFT_LOCAL_RANK" || k == "WEFT_LOCAL_SIZE" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Start validates cfg, starts the PMI server and every rank, and returns the
// running job. A configuration or start-up error kills whatever had started.
func Start(ctx context.Context, cfg Config) (*Job, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	launcher, err := ChooseLauncher(cfg.Launcher, cfg.Hosts, os.Getenv)
	if err != nil {
		return nil, err
	}
	if launcher != "ssh" { // ssh ranks change directory on their hosts
		if st, err := os.Stat(cfg.Dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%w: working directory %q is not a directory here", ErrUsage, cfg.Dir)
		}
	}
	j := &Job{
		cfg:      cfg,
		launcher: launcher,
		events:   make(chan event, cfg.NP+1),
		fail:     make(chan *ExitError, cfg.NP+4),
		sigs:     make(chan os.Signal, 8),
	}
	j.ctx, j.cancel = context.WithCancel(ctx)
	j.out = newOutputs(cfg.Stdout, cfg.Stderr, cfg.TagOutput)
	if launcher == "slurm" {
		err = j.startSlurm()
	} else {
		err = j.startRanks()
	}
	if err != nil {
		j.killAll(syscall.SIGKILL)
		j.reapAll()
		j.shutdown()
		return nil, err
	}
	log.Debug("job started", "launcher", launcher, "np", cfg.NP, "argv", cfg.Apps[0].Argv, "programs", len(cfg.Apps))
	return j, nil
}

func (j *Job) startRanks() error {
	cfg := j.cfg
	hosts := cfg.Hosts
	if j.launcher == "local" {
		hosts = nil
	}
	_, lrank, lsize, mapping := placement(cfg.NP, hosts)
	apps, appOf := cfg.Apps, cfg.appOf()
	progs := make([]string, len(apps)) // per app: its program (found in PATH, local ranks)
	for i, a := range apps {
		progs[i] = a.Argv[0]
	}
	var binds [][]int // per local rank
	nodeCPUs := ""    // the CPUs the local ranks share, for their wait policies
	procs := ""       // GOMAXPROCS for local ranks that outnumber the CPUs
	if j.launcher == "local" {
		for i, prog := range progs {
			p, err := exec.LookPath(prog)
			if err != nil {
				return fmt.Errorf("launch: program %q: %w", prog, err)
			}
			progs[i] = p
		}
		cpus, err := allowedCPUs()
		if err != nil {
			return err
		}
		if binds, err = bindSets(cfg.Bind, cfg.NP, cpus); err != nil {
			return err
		}
		nodeCPUs = "WEFT_NODE_CPUS=" + strconv.Itoa(len(cpus))
		procs = shareProcs(cfg.Bind, cfg.NP, len(cpus), append(baseEnv(), cfg.Env...))
		if binds != nil {
			log.Debug("ranks bound", "mode", cfg.Bind, "cpus", cpuList(cpus), "per-rank", len(binds[0]))
		}
	}
	secret, err := pmi.NewSecret()
	if err != nil {
		return err
	}
	if j.launcher == "local" {
		if j.wd, err = startWatchdog(secret); err != nil {
			return err
		}
	}
	j.srv, err = pmi.NewServer(pmi.ServerConfig{
		Size:           cfg.NP,
		Secret:         secret,
		ProcessMapping: mapping,
		AppNum:         appOf,
		OnAbort: func(rank, code int, msg string) {
			if code == 0 {
				code = 1
			}
			reason := fmt.Sprintf("called abort with status %d", code)
			if msg != "" {
				reason += ": " + msg
			}
			j.report(&ExitError{Rank: rank, Code: code, Reason: reason})
		},
		OnLost: func(rank int) {
			j.report(&ExitError{Rank: rank, Code: 1, Reason: "closed its PMI connection without PMI finalize", Err: errLost})
		},
		OnStall: func(rank int) {
			j.report(&ExitError{Rank: rank, Code: 1, Reason: "left the job without PMI finalize while other ranks wait in a fence", Err: errStall})
		},
	})
	if err != nil {
		return err
	}
	j.secret = secret
	var port string
	var dial []string // per host: the address its ranks dial
	if j.launcher == "ssh" {
		if port, dial, err = j.listenPMI(hosts); err != nil {
			return err
		}
	}
	// Launcher defaults first: the launcher's environment and Config.Env
	// override them.
	env := append([]string{stacksEnvEntry()}, baseEnv()...)
	if cfg.Provider != "" {
		env = append(env, "WEFT_PROVIDER="+cfg.Provider)
	}
	env = append(env, cfg.Env...)
	node, _, _, _ := placement(cfg.NP, hosts)
	for r := range cfg.NP {
		renv := []string{
			"PMI_RANK=" + strconv.Itoa(r),
			"PMI_SIZE=" + strconv.Itoa(cfg.NP),
			"WEFT_LOCAL_RANK=" + strconv.Itoa(lrank[r]),
			"WEFT_LOCAL_SIZE=" + strconv.Itoa(lsize[r]),
		}
		app := apps[appOf[r]]
		if len(apps) > 1 {
			renv = append(append(renv, "WEFT_APPNUM="+strconv.Itoa(appOf[r])), app.Env...)
		}
		var cmd *exec.Cmd
		var pmiConn net.Conn
		var childEnd *os.File
		if j.launcher == "local" {
			// A socketpair per rank (PMI_FD): private by construction, and
			// what MPICH's own PMI-1 client expects, so MPICH programs run
			// under fabrun too.
			if pmiConn, childEnd, err = pmiSocketpair(); err != nil {
				return fmt.Errorf("launch: rank %d: %w", r, err)
			}
			cmd = exec.Command(progs[appOf[r]], app.Argv[1:]...)
			// The secret also tells the bootstrap it runs under fabrun. An
			// environment is readable by its owner only.
			cmd.Env = append(append(append([]string{}, env...), renv...), "PMI_FD=3", "WEFT_PMI_SECRET="+secret, nodeCPUs)
			if procs != "" {
				cmd.Env = append(cmd.Env, procs)
			}
			cmd.Dir = cfg.Dir
			cmd.ExtraFiles = []*os.File{childEnd}
		} else {
			renv = append(renv, "PMI_PORT="+net.JoinHostPort(dial[node[r]], port), "PMI_ID="+strconv.Itoa(r))
			cmd = sshCommand(cfg, hosts[node[r]].Name, app.Argv, append(append([]string{}, cfg.Env...), providerEnv(cfg)...), renv)
			cmd.Env = env
		}
		in := stdinNone
		switch {
		case j.launcher == "ssh":
			in = stdinLifeline
		case r == 0:
			in = stdinForward
		}
		var cpus []int
		if binds != nil {
			cpus = binds[lrank[r]]
		}
		err := j.spawn(r, cmd, in, cpus)
		if err == nil && in == stdinLifeline {
			// The remote wrapper's first line: the job secret, kept out of
			// every command line. A pipe takes these few bytes at once.
			if _, werr := j.lifelines[len(j.lifelines)-1].Write([]byte(secret + "\n")); werr != nil {
				log.Debug("job secret to ssh rank", "rank", r, "err", werr)
			}
		}
		if childEnd != nil {
			childEnd.Close() // the rank has its copy
		}
		if err != nil {
			if pmiConn != nil {
				pmiConn.Close()
			}
			return fmt.Errorf("launch: start rank %d: %w", r, err)
		}
		if j.wd != nil {
			j.wd.guard(cmd.Process.Pid) // the rank leads its own session
		}
		if pmiConn != nil {
			if err := j.srv.Attach(pmiConn, r); err != nil {
				return fmt.Errorf("launch: rank %d: %w", r, err)
			}
		}
	}
	return nil
}

// listenPMI starts the PMI server's TCP listeners for ssh ranks and returns
// their common port and, per host, the address that host's ranks dial.
func (j *Job) listenPMI(hosts []Host) (port string, dial []string, err error) {
	listen, dial, err := pmiAddresses(hosts, j.cfg.PMIHost, lookupIP, routeSource)
	if err != nil {
		return "", nil, err
	}
	ls, err := listenAll(listen)
	if err != nil {
		return "", nil, err
	}
	j.pmiAddrs = nil
	for _, l := range ls {
		j.pmiAddrs = append(j.pmiAddrs, l.Addr().String())
		go func() {
			if err := j.srv.Serve(j.ctx, l); err != nil {
				j.report(&ExitError{Rank: -1, Code: 1, Reason: "PMI server failed: " + err.Error()})
			}
		}()
	}
	log.Debug("PMI server listening", "addrs", j.pmiAddrs, "dial", dial)
	return strconv.Itoa(ls[0].Addr().(*net.TCPAddr).Port), dial, nil
}

// pmiSocketpair returns the launcher's end of a new Unix socketpair as a
// net.Conn and the rank's end as a file to pass as descriptor 3.
func pmiSocketpair() (net.Conn, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("PMI socketpair: %w", err)
	}
	parent := os.NewFile(uintptr(fds[0]), "pmi-launcher")
	child := os.NewFile(uintptr(fds[1]), "pmi-rank")
	conn, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		child.Close()
		return nil, nil, fmt.Errorf("PMI socketpair: %w", err)
	}
	return conn, child, nil
}

var (
	errStall = errors.New("launch: PMI fence stalled")
	errLost  = errors.New("launch: PMI connection lost without finalize")
)

// exitedWithoutFinalize is the failure of a rank that spoke PMI and exited
// 0 without finalizing.
func exitedWithoutFinalize(rank int) *ExitError {
	return &ExitError{Rank: rank, Code: 1, Reason: "exited without PMI finalize"}
}

// report hands a failure from a PMI server goroutine to the supervisor
// without ever blocking (only the first failure matters).
func (j *Job) report(e *ExitError) {
	select {
	case j.fail <- e:
	default:
	}
}

func providerEnv(cfg Config) []string {
	if cfg.Provider == "" {
		return nil
	}
	return []string{"WEFT_PROVIDER=" + cfg.Provider}
}

func isLoopbackSSHTarget(name string) bool {
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		name = name[i+1:]
	}
	return name == "localhost" || strings.HasPrefix(name, "127.") || name == "::1"
}

// What a started process gets as standard input.
const (
	stdinNone     = iota // /dev/null
	stdinForward         // Config.Stdin
	stdinLifeline        // a pipe fabrun holds open until the job ends (ssh ranks: EOF means "stop")
)

// spawn starts one process in its own session and process group (setsid, as
// Hydra does for its ranks) with captured output. A session of its own also
// gives each rank its own scheduler autogroup on kernels with
// CONFIG_SCHED_AUTOGROUP, instead of sharing one CPU share with everything
// else in the launcher's session; on the shared 2-core test machine that cut
// a 4-rank examples/hello job from 2.3 s to 1.4 s (docs/perf/fabrun.md).
func (j *Job) spawn(id int, cmd *exec.Cmd, stdin int, cpus []int) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	var outW, errW *os.File
	var err error
	if j.cfg.OutputDir != "" && id >= 0 {
		outW, errW, err = rankFiles(j.cfg.OutputDir, id)
	} else {
		outW, errW, err = j.out.pipes(id)
	}
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inW *os.File
	if stdin == stdinForward && j.cfg.Stdin != nil || stdin == stdinLifeline {
		var inR *os.File
		if inR, inW, err = os.Pipe(); err != nil {
			outW.Close()
			errW.Close()
			return err
		}
		cmd.Stdin = inR
		defer inR.Close()
	}
	err = startDetached(cmd, cpus)
	outW.Close() // the child holds its own copies
	errW.Close()
	if err != nil {
		if inW != nil {
			inW.Close()
		}
		return err
	}
	switch {
	case stdin == stdinLifeline:
		j.lifelines = append(j.lifelines, inW)
	case inW != nil:
		go func() {
			_, _ = io.Copy(inW, j.cfg.Stdin)
			inW.Close()
		}()
	}
	p := &proc{id: id, cmd: cmd, pgid: cmd.Process.Pid}
	j.procs = append(j.procs, p)
	go func() {
		err := cmd.Wait()
		j.events <- event{p: p, state: cmd.ProcessState, err: err}
	}()
	return nil
}

// rankFiles creates rank id's output files in dir.
func rankFiles(dir string, id int) (out, errf *os.File, err error) {
	name := filepath.Join(dir, "rank."+strconv.Itoa(id))
	if out, err = os.Create(name + ".out"); err != nil {
		return nil, nil, fmt.Errorf("launch: rank %d's output: %w", id, err)
	}
	if errf, err = os.Create(name + ".err"); err != nil {
		out.Close()
		return nil, nil, fmt.Errorf("launch: rank %d's output: %w", id, err)
	}
	return out, errf, nil
}

// ending reports whether a forwarded sig asks the ranks to end: those get
// SIGKILL when still alive KillGrace after it.
func ending(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM:
		return true
	}
	return false
}

// Signal forwards sig to every rank (their process groups, or the ssh/srun
// clients that stand for them). After SIGHUP, SIGINT, SIGQUIT or SIGTERM,
// ranks still alive KillGrace later get SIGKILL.
func (j *Job) Signal(sig os.Signal) {
	select {
	case j.sigs <- sig:
	default:
	}
}

// Wait waits for the job to end and returns nil when every rank exited 0, or
// an *ExitError naming the first rank that failed.
func (j *Job) Wait() error {
	j.waitOnce.Do(func() {
		j.result = j.supervise()
		if j.launcher == "local" {
			// Node segments a rank could not remove (it was killed before
			// its peers mapped them): their creators are gone now.
			dir := nodeseg.Dir()
			for _, kv := range j.cfg.Env {
				if v, ok := strings.CutPrefix(kv, "WEFT_SHM_DIR="); ok && v != "" {
					dir = v
				}
			}
			if n, err := nodeseg.SweepDir(dir); n > 0 || err != nil {
				log.Debug("removed node segments of ended ranks", "files", n, "err", err)
			}
		}
	})
	return j.result
}

func (j *Job) supervise() error {
	var timeout <-chan time.Time
	if j.cfg.Timeout > 0 {
		t := time.NewTimer(j.cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var first *ExitError
	live := len(j.procs)
	var killTimer <-chan time.Time
	// Ranks whose PMI connection ended without finalize (errLost) or that
	// left a fence waiting (errStall) while their process still ran: their
	// own exit status is preferred if it arrives within pmiGrace.
	pending := map[int]*ExitError{}
	pendingSince := map[int]time.Time{}
	pmiGrace := 150 * time.Millisecond
	if j.launcher == "ssh" {
		pmiGrace = time.Second // the ssh client exits a round trip after the remote rank
	}
	pendingTick := time.NewTicker(50 * time.Millisecond)
	defer pendingTick.Stop()
	endRanks := func() {
		j.killAll(syscall.SIGTERM)
		killTimer = time.After(j.cfg.KillGrace)
	}
	// After a timeout with TimeoutStacks, or a failure with FailStacks: the
	// processes asked for their stacks; the job is ended once they are gone
	// or at dumpEnd.
	var dumping []int
	var dumpEnd <-chan time.Time
	failWith := func(e *ExitError) {
		if first != nil {
			return
		}
		first = e
		log.Debug("job failing", "err", e)
		// Stacks first: on a timeout (TimeoutStacks), or when a rank
		// failed (FailStacks); not when the job was cancelled.
		stacks := j.cfg.FailStacks && e.Rank >= 0
		if errors.Is(e.Err, ErrTimeout) {
			stacks = j.cfg.TimeoutStacks
		}
		if stacks {
			if dumping = j.askStacks(syscall.SIGQUIT); dumping != nil {
				log.Debug("waiting for the ranks' stacks", "pids", dumping)
				dumpEnd = time.After(stackWait(j.cfg.KillGrace))
				return
			}
		}
		endRanks()
	}
	endDump := func() {
		dumping, dumpEnd = nil, nil
		endRanks()
	}
	ctxDone := j.ctx.Done()
	for live > 0 {
		select {
		case ev := <-j.events:
			live--
			ev.p.done, ev.p.state = true, ev.state
			if first != nil {
				continue
			}
			if e := exitFailure(ev); e != nil {
				if ev.p.id < 0 {
					j.out.flush() // srun's report of the failing task
					e.Reason = "srun " + e.Reason
					if j.srunWatch != nil {
						if r, c, ok := j.srunWatch.failure(); ok {
							e = &ExitError{Rank: r, Code: c, Reason: "exited with status " + strconv.Itoa(c) + " (reported by srun)"}
						}
					}
				}
				failWith(e)
			} else if e, ok := pending[ev.p.id]; ok {
				if errors.Is(e.Err, errLost) {
					e = exitedWithoutFinalize(ev.p.id)
				}
				e.Err = nil
				failWith(e)
			} else if j.srv != nil && ev.p.id >= 0 && j.srv.Spoke(ev.p.id) && !j.srv.Finalized(ev.p.id) {
				failWith(exitedWithoutFinalize(ev.p.id))
			}
		case e := <-j.fail:
			if errors.Is(e.Err, errStall) || errors.Is(e.Err, errLost) {
				p := j.procByID(e.Rank)
				switch {
				case p != nil && !p.done:
					// Prefer the rank's own exit status if it is about to arrive.
					if _, ok := pending[e.Rank]; !ok {
						pending[e.Rank] = e
						pendingSince[e.Rank] = time.Now()
					}
					continue
				case errors.Is(e.Err, errLost) && p != nil:
					e = exitedWithoutFinalize(e.Rank) // exited 0, or it would have failed already
				}
				e.Err = nil
			}
			failWith(e)
		case <-pendingTick.C:
			if dumping != nil && allGone(dumping) {
				endDump()
			}
			for r, e := range pending {
				// Still running a while after leaving PMI: the rank is gone
				// from the job for good. A zombie's exit event is on its way.
				p := j.procByID(r)
				if p != nil && !p.done && first == nil && time.Since(pendingSince[r]) >= pmiGrace && !isZombie(p.cmd.Process.Pid) {
					e.Err = nil
					failWith(e)
				}
			}
		case sig := <-j.sigs:
			log.Debug("forwarding signal", "sig", sig)
			if s, ok := sig.(syscall.Signal); ok {
				j.killAll(s)
				if ending(s) && killTimer == nil {
					killTimer = time.After(j.cfg.KillGrace)
				}
			}
		case <-timeout:
			e := &ExitError{Rank: -1, Code: 124, Reason: fmt.Sprintf("job timed out after %v", j.cfg.Timeout), Err: ErrTimeout}
			timeout = nil
			failWith(e)
		case <-dumpEnd:
			log.Debug("stacks: processes still alive", "pids", dumping)
			endDump()
		case <-ctxDone:
			failWith(&ExitError{Rank: -1, Code: 130, Reason: "job cancelled: " + context.Cause(j.ctx).Error(), Err: j.ctx.Err()})
			ctxDone = nil
		case <-killTimer:
			j.killAll(syscall.SIGKILL)
			killTimer = nil
		}
	}
	// Sweep anything left in the ranks' process groups.
	j.killAll(syscall.SIGKILL)
	j.waitGroupsGone(time.Second)
	if first == nil {
		first = j.lostAfterExit()
	}
	j.shutdown()
	if first != nil {
		return first
	}
	return nil
}

// lostAfterExit runs once every rank exited 0: it lets the PMI server read
// what the ranks sent before exiting (a rank may send init and exit before
// the server has read it) and reports a rank that spoke PMI without
// finalizing.
func (j *Job) lostAfterExit() *ExitError {
	if j.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err := j.srv.WaitRanks(ctx)
	cancel()
	if err != nil {
		log.Debug("PMI connections outlive the ranks", "err", err)
	}
	for {
		select {
		case e := <-j.fail:
			if errors.Is(e.Err, errLost) {
				return exitedWithoutFinalize(e.Rank)
			}
			e.Err = nil
			return e // a stall, or an abort read after its rank exited
		default:
			for _, p := range j.procs {
				if p.id >= 0 && j.srv.Spoke(p.id) && !j.srv.Finalized(p.id) {
					return exitedWithoutFinalize(p.id)
				}
			}
			return nil
		}
	}
}

// isZombie reports whether pid has exited and awaits its wait.
func isZombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // gone already
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// exitFailure turns a non-zero exit into an ExitError.
func exitFailure(ev event) *ExitError {
	st := ev.state
	if st == nil {
		return &ExitError{Rank: ev.p.id, Code: 1, Reason: fmt.Sprintf("could not be waited for: %v", ev.err)}
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		return &ExitError{Rank: ev.p.id, Code: 128 + int(ws.Signal()), Signal: ws.Signal(), Reason: "killed by signal " + strconv.Itoa(int(ws.Signal())) + " (" + ws.Signal().String() + ")"}
	case st.ExitCode() != 0:
		return &ExitError{Rank: ev.p.id, Code: st.ExitCode(), Reason: "exited with status " + strconv.Itoa(st.ExitCode())}
	}
	return nil
}

func (j *Job) procByID(id int) *proc {
	for _, p := range j.procs {
		if p.id == id {
			return p
		}
	}
	return nil
}

// killAll signals every process group (ESRCH for finished ones is ignored).
// Ending the job (SIGTERM, SIGKILL) also closes the ssh ranks' lifelines,
// which makes their remote wrappers kill the remote programs.
func (j *Job) killAll(sig syscall.Signal) {
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
		for _, w := range j.lifelines {
			w.Close()
		}
	}
	for _, p := range j.procs {
		if err := syscall.Kill(-p.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			log.Debug("kill", "pgid", p.pgid, "sig", sig, "err", err)
		}
	}
}

// reapAll waits for processes started so far (used after a failed Start).
func (j *Job) reapAll() {
	for range j.procs {
		<-j.events
	}
}

// shutdown stops the PMI server and drains output.
func (j *Job) shutdown() {
	j.cancel()
	if j.srv != nil {
		j.srv.Close()
	}
	if j.wd != nil {
		j.wd.stop()
	}
	j.out.wait(time.Second)
}

// Launcher returns the launcher actually used ("local", "ssh" or "slurm").
func (j *Job) Launcher() string { return j.launcher }
