package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
)

// nodeScript prints, for the rank that runs it, the Slurm node and the
// settings the template exported, then runs the real program.
const nodeScript = `#!/bin/sh
echo "where rank=$PMI_RANK node=$SLURMD_NODENAME fabrun=$(command -v fabrun) provider=$WEFT_PROVIDER universe=$FI_UNIVERSE_SIZE gomaxprocs=$GOMAXPROCS transport=$WEFT_NODE_TRANSPORT shared=$WEFT_ENDPOINT_SHARED"
exec "$@"
`

// where is what nodeScript printed for one rank.
type where struct{ node, fabrun, provider, universe, gomaxprocs, transport, shared string }

var whereLine = regexp.MustCompile(`(?m)^\[(\d+)\] where rank=(\d+) node=(\S*) fabrun=(\S*) provider=(\S*) universe=(\S*) gomaxprocs=(\S*) transport=(\S*) shared=(\S*)$`)

// parseWhere returns nodeScript's report per rank, checking that each line's
// output tag matches the rank it names.
func parseWhere(t *testing.T, out string) map[string]where {
	t.Helper()
	ranks := map[string]where{}
	for _, m := range whereLine.FindAllStringSubmatch(out, -1) {
		if m[1] != m[2] {
			t.Errorf("line tagged [%s] printed by rank %s", m[1], m[2])
		}
		ranks[m[2]] = where{m[3], m[4], m[5], m[6], m[7], m[8], m[9]}
	}
	return ranks
}

// nodesOf counts the ranks on each node.
func nodesOf(ranks map[string]where) map[string]int {
	n := map[string]int{}
	for _, w := range ranks {
		n[w.node]++
	}
	return n
}

// TestSbatchTemplates submits each template of deploy/slurm to a private
// Slurm of two nodes (two slurmd on this host), with the templates' own
// resource lines (fewer ranks per node for the last two, overridden on the
// sbatch command line as users do, to fit this machine's two cores), and
// checks every rank's output, where it ran, and the settings the template
// gave it.
func TestSbatchTemplates(t *testing.T) {
	t.Parallel() // each waits mostly on other processes
	slurm := proctest.StartSlurm(t, 4, 2)
	bin := binDir(t)
	work := t.TempDir()
	wrap := filepath.Join(bin, "where.sh")
	if err := os.WriteFile(wrap, []byte(nodeScript), 0o755); err != nil {
		t.Fatal(err)
	}
	hello, eps := filepath.Join(bin, "hello"), filepath.Join(bin, "endpoints")

	// submit runs one template to completion and returns the job's output
	// file, after checking that nothing of it is left. opts go before the
	// template, as a user overrides its #SBATCH lines. With modulePath
	// set, sbatch runs from a login shell that has `module use`d it but
	// loaded nothing, so fabrun is not on the PATH the job inherits;
	// otherwise fabrun's directory leads PATH.
	submit := func(t *testing.T, template, modulePath string, opts []string, args ...string) string {
		t.Helper()
		mark := proctest.Marker()
		env := []string{slurm.Env(), mark, "WEFT_TIMEOUT=60s"}
		// --time bounds the job in Slurm too; everything else comes from
		// the template's #SBATCH lines and opts.
		sb := append([]string{"--parsable", "--time=2", "--chdir=" + work}, opts...)
		sb = append(append(sb, deployFile(t, "slurm/"+template)), args...)
		cmd := append([]string{"sbatch"}, sb...)
		if modulePath != "" {
			home, _ := os.UserHomeDir()
			login := append([]string{"-i", "HOME=" + home, "TERM=dumb", "MP=" + modulePath}, env...)
			login = append(login, "bash", "-l", "-c", `module use "$MP" && exec "$@"`, "login")
			cmd, env = append(append([]string{"env"}, login...), cmd...), nil
		} else {
			env = append(env, pathWith(bin))
		}
		start := time.Now()
		r := proctest.Run(t, 30*time.Second, env, "", cmd[0], cmd[1:]...)
		id := strings.TrimSpace(r.Stdout)
		if r.Code != 0 {
			t.Fatalf("sbatch %s: exit %d\n%s%s", template, r.Code, r.Stdout, r.Stderr)
		}
		state, code := slurm.WaitJob(t, id, 90*time.Second)
		name := strings.TrimSuffix(template, ".sbatch")
		out, err := os.ReadFile(filepath.Join(work, fmt.Sprintf("%s-%s.out", name, id)))
		if state != "COMPLETED" || code != "0:0" || err != nil {
			t.Fatalf("job %s (%s): state %s, exit code %s (output file: %v)\njob output:\n%s", id, template, state, code, err, out)
		}
		t.Logf("sbatch %s, job done: %v", template, time.Since(start))
		if left := proctest.WaitGone(mark, 5*time.Second); len(left) > 0 {
			t.Errorf("processes of job %s left behind: %v", id, left)
		}
		return string(out)
	}

	// The one-node job finds fabrun through the modulefile; the others
	// through PATH.
	prefix := installPrefix(t)

	t.Run("one-node", func(t *testing.T) {
		out := submit(t, "weft-one-node.sbatch", filepath.Join(prefix, "share", "modules", "modulefiles"), nil, wrap, hello)
		ranks := parseWhere(t, out)
		if len(ranks) != 4 || len(nodesOf(ranks)) != 1 {
			t.Errorf("want 4 ranks on one node, got %v:\n%s", ranks, out)
		}
		if w := ranks["0"]; w.provider != "shm" || w.fabrun != filepath.Join(prefix, "bin", "fabrun") {
			t.Errorf("provider %q, fabrun %q: want shm, and fabrun of the weft module:\n%s", w.provider, w.fabrun, out)
		}
		checkHello(t, out, 4)
	})

	t.Run("multi-node", func(t *testing.T) {
		out := submit(t, "weft-multi-node.sbatch", "", nil, wrap, hello)
		ranks := parseWhere(t, out)
		checkSpread(t, ranks, 1, out)
		for r, w := range ranks {
			if w.universe != "2" || w.provider != "" {
				t.Errorf("rank %s: FI_UNIVERSE_SIZE=%q WEFT_PROVIDER=%q, want 2 and weft's choice", r, w.universe, w.provider)
			}
		}
		checkHello(t, out, 2)
	})

	t.Run("ranks-per-node", func(t *testing.T) {
		out := submit(t, "weft-ranks-per-node.sbatch", "", []string{"--ntasks-per-node=2"}, wrap, hello)
		ranks := parseWhere(t, out)
		checkSpread(t, ranks, 2, out)
		for r, w := range ranks {
			if w.universe != "4" || w.gomaxprocs != "1" || w.transport != "native" {
				t.Errorf("rank %s: %+v, want FI_UNIVERSE_SIZE 4, GOMAXPROCS 1, native node transport", r, w)
			}
		}
		checkHello(t, out, 4)
	})

	t.Run("endpoints", func(t *testing.T) {
		out := submit(t, "weft-endpoints.sbatch", "", []string{"--ntasks-per-node=1"}, wrap, eps, "-eps", "{eps}", "-rounds", "1")
		ranks := parseWhere(t, out)
		checkSpread(t, ranks, 1, out)
		for r, w := range ranks {
			if w.universe != "4" || w.gomaxprocs != "2" || w.shared != "private" {
				t.Errorf("rank %s: %+v, want FI_UNIVERSE_SIZE 4 (2 ranks x 2 endpoints), GOMAXPROCS 2, private endpoints", r, w)
			}
		}
		// 2 processes x {eps}=2 endpoints: 4 endpoint ranks, each of
		// which passed the token around and agreed on 0+1+2+3.
		var got []string
		for _, m := range regexp.MustCompile(`(?m)^\[\d+\] rank (\d+) of 4 \(node-local \d+ of \d+, shared=false\): ring sum 6 ok$`).FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
		}
		sort.Strings(got)
		if strings.Join(got, ",") != "0,1,2,3" {
			t.Errorf("endpoint ranks that reported ring sum 6: %v, want 0..3:\n%s", got, out)
		}
	})

	t.Run("usage", func(t *testing.T) {
		// A template run without a program says how to call it.
		for _, tpl := range []string{"weft-one-node", "weft-multi-node", "weft-ranks-per-node", "weft-endpoints"} {
			r := proctest.Run(t, 10*time.Second, nil, "", "bash", deployFile(t, "slurm/"+tpl+".sbatch"))
			if r.Code != 2 || !strings.Contains(r.Stderr, "usage: sbatch") {
				t.Errorf("%s without a program: exit %d, %q", tpl, r.Code, r.Stderr)
			}
		}
	})
}

// checkSpread checks that perNode ranks ran on each of the two Slurm nodes.
func checkSpread(t *testing.T, ranks map[string]where, perNode int, out string) {
	t.Helper()
	if n := nodesOf(ranks); len(ranks) != 2*perNode || n["wn1"] != perNode || n["wn2"] != perNode {
		t.Errorf("want %d ranks on each of wn1, wn2, got %v:\n%s", perNode, n, out)
	}
}

// checkHello checks that n ranks of examples/hello printed their tagged ring
// line.
func checkHello(t *testing.T, out string, n int) {
	t.Helper()
	for rank := range n {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^\[%d\] rank %d of %d on \S+: ring ok$`, rank, rank, n)).MatchString(out) {
			t.Errorf("no ring ok line of rank %d of %d in:\n%s", rank, n, out)
		}
	}
}
