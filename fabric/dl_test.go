package fabric

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

// The load tests run the test binary as a child (WEFT_FABRIC_DLCHILD=mode,
// TestMain), since libfabric is loaded at most once per process and this
// process may have loaded it already. The child reports "key value" lines.

// loadSignals are the signals libinfinipath's constructor takes.
var loadSignals = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGILL, syscall.SIGABRT}

// mappedLibs lists which of libfabric, libinfinipath and libpsm2 are mapped
// into this process ("-" for none).
func mappedLibs() string {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return "error:" + err.Error()
	}
	var got []string
	for _, l := range []string{"libfabric.so", "libinfinipath.so", "libpsm2.so"} {
		if bytes.Contains(maps, []byte("/"+l)) {
			got = append(got, l)
		}
	}
	if len(got) == 0 {
		return "-"
	}
	return strings.Join(got, ",")
}

// dlChild is the child side of the load tests.
func dlChild(mode string) int {
	report := func(k string, v any) { fmt.Printf("%s %v\n", k, v) }
	switch mode {
	case "absent":
		libName = "libweft-no-such-library.so.1"
	case "nosym":
		libName = "libc.so.6" // loads, but has none of libfabric's functions
	case "loud":
		libQuietIPath = false
	}
	report("before-maps", mappedLibs())
	report("before-loaded", Loaded())
	switch mode {
	case "load", "loud":
		if _, err := GetInfo(nil); err != nil {
			report("error", strings.ReplaceAll(err.Error(), "\n", " "))
			return 3
		}
	case "race":
		const n = 8
		start := make(chan struct{})
		errc := make(chan error, n)
		for range n {
			go func() {
				<-start
				_, err := GetInfo(nil)
				errc <- err
			}()
		}
		close(start)
		for range n {
			if err := <-errc; err != nil {
				report("error", strings.ReplaceAll(err.Error(), "\n", " "))
			}
		}
	case "absent", "nosym":
		_, err := GetInfo(nil)
		report("getinfo-notsupported", errors.Is(err, ErrNotSupported))
		report("getinfo-error", err)
		_, serr := Select(nil, true)
		report("select-notsupported", errors.Is(serr, ErrNotSupported))
		_, again := GetInfo(&Hints{Provider: "shm"})
		report("same-error", err != nil && again != nil && again.Error() == err.Error())
		_, oerr := OpenFabric(&Info{})
		report("openfabric-invalid", errors.Is(oerr, ErrInvalid))
	case "dlprov":
		for _, p := range []string{"weftdl", "weftdlnolink"} {
			infos, err := GetInfo(&Hints{Provider: p})
			switch {
			case err == nil:
				var names []string
				for _, i := range infos {
					names = append(names, i.Provider)
				}
				report("prov-"+p, strings.Join(names, ","))
			case errors.Is(err, ErrNoProvider):
				report("prov-"+p, "none")
			default:
				report("prov-"+p, "error:"+err.Error())
			}
		}
	default:
		return 2
	}
	report("loads", libLoads())
	report("after-maps", mappedLibs())
	report("after-loaded", Loaded())
	for _, s := range loadSignals {
		report(fmt.Sprintf("sig-%d", int(s)), fmt.Sprintf("self=%v restored=%v", sigInSelf(int(s)), sigLoadRestored(int(s))))
	}
	report("grabbed", fmt.Sprintf("%#x", sigGrabbedNow()))
	if mode == "loud" {
		report("ready", os.Getpid())
		time.Sleep(time.Minute)
		return 4
	}
	return 0
}

// dlRun runs the child in mode with env added and returns its report; the
// child must exit with status 0 within a minute.
func dlRun(t *testing.T, mode string, env ...string) map[string]string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(append(os.Environ(), "WEFT_FABRIC_DLCHILD="+mode), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s: %v\nstdout:\n%s\nstderr:\n%s", mode, err, out, stderr.String())
	}
	return parseReport(string(out))
}

func parseReport(out string) map[string]string {
	r := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, " ")
		r[k] = v
	}
	return r
}

func wantReport(t *testing.T, r map[string]string, key, want string) {
	t.Helper()
	if got, ok := r[key]; !ok || got != want {
		t.Errorf("%s = %q, want %q (report %v)", key, got, want, r)
	}
}

// TestNotLinked: the package does not link libfabric. The test binary
// (which links every file of the package) neither needs libfabric.so nor
// imports one of its functions: they are resolved at run time.
func TestNotLinked(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range libs {
		if strings.Contains(l, "fabric") {
			t.Errorf("the test binary needs %s", l)
		}
	}
	syms, err := f.ImportedSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "fi_") {
			t.Errorf("the test binary imports %s (%s %s)", s.Name, s.Library, s.Version)
		}
	}
}

// TestLoadOnFirstUse: a process that has not called fabric has none of
// libfabric, libinfinipath and libpsm2 mapped; its first GetInfo loads
// libfabric (and with it what it links), and afterwards the handlers of
// the signals libinfinipath would take are still the Go runtime's.
func TestLoadOnFirstUse(t *testing.T) {
	r := dlRun(t, "load")
	wantReport(t, r, "before-maps", "-")
	wantReport(t, r, "before-loaded", "false")
	wantReport(t, r, "after-loaded", "true")
	wantReport(t, r, "loads", "1")
	wantReport(t, r, "grabbed", "0x0")
	if !strings.Contains(r["after-maps"], "libfabric.so") {
		t.Errorf("after GetInfo libfabric is not mapped: %q", r["after-maps"])
	}
	t.Logf("mapped after the first GetInfo: %s", r["after-maps"])
	for _, s := range loadSignals {
		// IPATH_NO_BACKTRACE kept libinfinipath from installing anything:
		// nothing to undo.
		wantReport(t, r, fmt.Sprintf("sig-%d", int(s)), "self=true restored=false")
	}
}

// TestLoadUndoesHandlers: without IPATH_NO_BACKTRACE, libinfinipath's
// constructor installs its handlers during the load; the load puts the Go
// runtime's back, and SIGTERM then kills the process as the signal.
func TestLoadUndoesHandlers(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "WEFT_FABRIC_DLCHILD=loud")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	var lines strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "ready ") {
			break
		}
	}
	r := parseReport(lines.String())
	if _, ok := r["ready"]; !ok {
		t.Fatalf("child did not get ready: %q\n%s", lines.String(), stderr.String())
	}
	wantReport(t, r, "grabbed", "0x0")
	ipath := strings.Contains(r["after-maps"], "libinfinipath.so")
	if !ipath {
		t.Logf("libinfinipath is not loaded with this libfabric (%s): no handler to undo", r["after-maps"])
	}
	for _, s := range loadSignals {
		wantReport(t, r, fmt.Sprintf("sig-%d", int(s)), fmt.Sprintf("self=true restored=%v", ipath))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var werr error
	select {
	case werr = <-done:
		done <- werr // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("child still running 20 s after SIGTERM")
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("child after SIGTERM: %v (%v), want killed by SIGTERM\n%s", werr, ws, stderr.String())
	}
}

// TestLoadConcurrent: eight goroutines make the first call at once; the
// library is loaded once and every call succeeds.
func TestLoadConcurrent(t *testing.T) {
	r := dlRun(t, "race")
	if e, ok := r["error"]; ok {
		t.Errorf("a concurrent first GetInfo failed: %s", e)
	}
	wantReport(t, r, "loads", "1")
	wantReport(t, r, "after-loaded", "true")
}

// TestLoadAbsent: without the library, GetInfo and Select fail with an
// error wrapping ErrNotSupported that names it, every time, and nothing
// is loaded.
func TestLoadAbsent(t *testing.T) {
	r := dlRun(t, "absent")
	wantReport(t, r, "getinfo-notsupported", "true")
	wantReport(t, r, "select-notsupported", "true")
	wantReport(t, r, "same-error", "true")
	wantReport(t, r, "openfabric-invalid", "true")
	wantReport(t, r, "after-loaded", "false")
	wantReport(t, r, "after-maps", "-")
	wantReport(t, r, "loads", "1")
	if !strings.Contains(r["getinfo-error"], "libweft-no-such-library.so.1") {
		t.Errorf("the error does not name the library: %q", r["getinfo-error"])
	}
}

// TestLoadWrongLibrary: a library without libfabric's versioned functions
// is refused with an error naming the missing one.
func TestLoadWrongLibrary(t *testing.T) {
	r := dlRun(t, "nosym")
	wantReport(t, r, "getinfo-notsupported", "true")
	wantReport(t, r, "select-notsupported", "true")
	wantReport(t, r, "after-loaded", "false")
	if !strings.Contains(r["getinfo-error"], "fi_getinfo@FABRIC_1.3") {
		t.Errorf("the error does not name the missing function: %q", r["getinfo-error"])
	}
}

// dlProvider is a minimal libfabric provider built as a separate shared
// object: libfabric loads such providers itself (dlopen of lib*-fi.so
// found in FI_PROVIDER_PATH). Its getinfo calls fi_dupinfo, a function of
// libfabric, so it loads only if that resolves.
const dlProvider = `#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

static int dl_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		const struct fi_info *hints, struct fi_info **info) {
	struct fi_info *i = fi_dupinfo(NULL);
	(void)version; (void)node; (void)service; (void)flags; (void)hints;
	if (!i)
		return -FI_ENOMEM;
	i->caps = FI_MSG;
	i->ep_attr->type = FI_EP_RDM;
	i->fabric_attr->name = strdup("weftdl");
	i->domain_attr->name = strdup("weftdl");
	*info = i;
	return 0;
}
static int dl_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context) {
	(void)attr; (void)fabric; (void)context;
	return -FI_ENOSYS;
}
static void dl_cleanup(void) {}
static struct fi_provider dl_prov = {
	.version = FI_VERSION(1, 0),
	.fi_version = FI_VERSION(1, 17),
	.name = NAME,
	.getinfo = dl_getinfo,
	.fabric = dl_fabric,
	.cleanup = dl_cleanup,
};
FI_EXT_INI { return &dl_prov; }
`

// TestDLProvider: libfabric, loaded RTLD_LOCAL, still loads providers
// built as separate objects when they link libfabric (as libfabric's own
// build links its dl providers): the provider's references resolve
// through its own dependency on libfabric.so.1. One that does not link it
// is not loaded (libfabric is not in the global scope; a program linked
// with -lfabric would have loaded it).
func TestDLProvider(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		testenv.Skip(t, "cc", "no C compiler to build a provider: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "prov.c")
	if err := os.WriteFile(src, []byte(dlProvider), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ name, lib string }{{"weftdl", "-lfabric"}, {"weftdlnolink", ""}} {
		args := []string{"-shared", "-fPIC", "-O", "-DNAME=\"" + b.name + "\"", "-o", filepath.Join(dir, "lib"+b.name+"-fi.so"), src}
		if b.lib != "" {
			args = append(args, b.lib)
		}
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %v: %v\n%s", args, err, out)
		}
	}
	r := dlRun(t, "dlprov", "FI_PROVIDER_PATH="+dir)
	if got := strings.Split(r["prov-weftdl"], ","); !slices.Contains(got, "weftdl") {
		t.Errorf("GetInfo of the provider that links libfabric found %q, want weftdl among them", got)
	}
	wantReport(t, r, "prov-weftdlnolink", "none")
}
