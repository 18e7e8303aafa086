package gpu

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/ddt/ddttest"
	"github.com/weft-hpc/weft/internal/gputools"
	"github.com/weft-hpc/weft/internal/testenv"
)

// RegisterBudget is the most registers a generated kernel may use: at 32
// registers a thread, an SM of sm_80 or sm_90 (65536 registers, 2048
// threads) runs at full occupancy.
const registerBudget = 32

// ptxBundle joins the modules of several plans (every word size) into one
// PTX text with one header, so that ptxas runs once.
func ptxBundle(t testing.TB, plans []*Plan) (string, int) {
	var b strings.Builder
	b.WriteString(".version 7.8\n.target sm_80\n.address_size 64\n")
	n := 0
	for _, p := range plans {
		for w := int64(1); w <= p.MaxWord(); w *= 2 {
			src, err := p.PTX(w)
			if err != nil {
				t.Fatal(err)
			}
			_, body, ok := strings.Cut(src, ".address_size 64\n")
			if !ok {
				t.Fatal("no PTX header")
			}
			b.WriteString(body)
			n += len(p.kinds())
		}
	}
	return b.String(), n
}

// CheckPtxas assembles every kernel of plans for sm_80 and sm_90 with
// ptxas -v -Werror and checks the report: every kernel present, no stack,
// no spills, at most registerBudget registers.
func checkPtxas(t *testing.T, plans []*Plan) {
	if _, err := gputools.Ptxas(); err != nil {
		testenv.Skip(t, "ptxas", "%v", err)
	}
	src, n := ptxBundle(t, plans)
	for _, arch := range []string{"sm_80", "sm_90"} {
		fs, err := gputools.Assemble(src, arch, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != n {
			t.Fatalf("%s: ptxas reported %d kernels, want %d", arch, len(fs), n)
		}
		most := 0
		for _, f := range fs {
			if f.SpillStores != 0 || f.SpillLoads != 0 || f.Stack != 0 || f.Registers > registerBudget || f.Registers == 0 {
				t.Errorf("%s %s: %+v (budget %d registers, no spills)", arch, f.Name, f, registerBudget)
			}
			most = max(most, f.Registers)
		}
		t.Logf("%s: %d kernels assembled, at most %d registers, no spills", arch, len(fs), most)
	}
}

// TestPtxasRandomTypes assembles the kernels of random types of every
// constructor.
func TestPtxasRandomTypes(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 22))
	var plans []*Plan
	seen := map[*Plan]bool{}
	for len(plans) < 30 {
		p, err := PlanOf(committed(t, ddttest.RandomType(r, 5)))
		if err == nil && !seen[p] {
			seen[p] = true
			plans = append(plans, p)
		}
	}
	checkPtxas(t, plans)
}

// TestPtxasLayouts assembles the kernels of the seed's layouts and of deep
// nests (levels beyond three, index levels inside loops).
func TestPtxasLayouts(t *testing.T) {
	var plans []*Plan
	for _, ty := range seedLayouts(t, 16) {
		p, err := PlanOf(ty)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	deep := ddt.Float32
	for i := 0; i < 6; i++ {
		deep = must(ddt.HVector(3, 1, int64(7+i)*deep.Extent(), must(ddt.IndexedBlock(1, []int{0, 2, 3}, deep))))
	}
	p, err := PlanOf(committed(t, deep))
	if err != nil {
		t.Fatal(err)
	}
	if p.Levels() < 6 {
		t.Fatalf("deep nest has %d levels:\n%s", p.Levels(), p)
	}
	plans = append(plans, p)
	checkPtxas(t, plans)
	checkPtxasVariants(t, p)
}

// checkPtxasVariants assembles, each alone, the one-kernel modules a
// Device builds for plan p (every kernel of its largest word size), for
// sm_80 with ptxas -v -Werror, and checks that each holds the same kernel
// text as the whole module (which checkPtxas assembles for every word
// size, both architectures).
func checkPtxasVariants(t *testing.T, p *Plan) {
	all, err := p.PTX(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range p.allKinds(p.maxWord) {
		src := p.kernelSource(langPTX, v)
		head, body, ok := strings.Cut(src, ".address_size 64\n")
		if !ok || !strings.HasPrefix(all, head) || strings.Count(src, ".entry") != 1 || !strings.Contains(all, body) {
			t.Fatalf("the module of %s alone is not the whole module's header and kernel:\n%s", p.kernelName(v), src)
		}
		fs, err := gputools.Assemble(src, "sm_80", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 1 || fs[0].Name != p.kernelName(v) || fs[0].Registers > registerBudget || fs[0].Stack != 0 || fs[0].SpillStores != 0 {
			t.Fatalf("%s alone: %+v", p.kernelName(v), fs)
		}
	}
}

// TestPtxasRejects: ptxas really checks the text (a broken kernel fails).
func TestPtxasRejects(t *testing.T) {
	if _, err := gputools.Ptxas(); err != nil {
		testenv.Skip(t, "ptxas", "%v", err)
	}
	p, _ := PlanOf(seedLayouts(t, 4)[0])
	src, _ := p.PTX(0)
	if _, err := gputools.Assemble(handPTX, "sm_80", t.TempDir()); err != nil {
		t.Fatalf("the benchmark's hand-written kernel: %v", err)
	}
	bad := strings.Replace(src, "ret;", "ret", 1)
	if _, err := gputools.Assemble(bad, "sm_80", t.TempDir()); err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("broken PTX: %v", err)
	}
}
