package launchers_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/proctest"
	"github.com/weft-hpc/weft/internal/testenv"
)

// startSSHD runs a private sshd on a localhost port with generated host and
// user keys, and returns the ssh command fabrun should use.
func startSSHD(t *testing.T) string {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if sshd, err = exec.LookPath("/usr/sbin/sshd"); err != nil {
			testenv.Skip(t, "sshd", "sshd not installed (Debian package openssh-server): %v", err)
		}
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		testenv.Skip(t, "sshd", "ssh client not installed (Debian package openssh-client): %v", err)
	}
	if os.Geteuid() != 0 {
		testenv.Skip(t, "root", "the test sshd logs in as root with a key; not running as root")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for _, k := range []string{"host_key", "user_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		testenv.Skip(t, "sshd", "cannot create sshd's privilege separation directory: %v", err)
	}
	os.Chmod("/run/sshd", 0o755)
	port := freePorts(t, 1)[0]
	cfg := filepath.Join(dir, "sshd_config")
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s/host_key
PidFile %s/sshd.pid
AuthorizedKeysFile %s/user_key.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
`, port, dir, dir, dir)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sshd, "-t", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("sshd -t rejects the generated config: %v\n%s", err, out)
	}
	cmd := exec.Command(sshd, "-D", "-e", "-f", cfg)
	logf, _ := os.Create(filepath.Join(dir, "sshd.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		testenv.Skip(t, "sshd", "sshd cannot start: %v", err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			syscall.Kill(pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
			t.Logf("sshd log:\n%s", b)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
			testenv.Skip(t, "sshd", "sshd did not listen on port %d within 10 s: %s", port, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Sprintf("ssh -p %d -i %s/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR", port, dir)
}

// TestSSHLauncher runs hello through fabrun's ssh launcher: two ranks on one
// "host" (shm), then one rank on each of two host names for the same machine
// (so each rank is alone on its node and the job uses tcp;ofi_rxm).
func TestSSHLauncher(t *testing.T) {
	ssh := startSSHD(t)
	fab, hello := binaries(t)
	r := run(t, 60*time.Second, []string{"WEFT_SSH=" + ssh}, fab, "-n", "2", "--launcher", "ssh", "--hosts", "127.0.0.1:2", "--tag-output", hello)
	checkRing(t, "fabrun ssh, one host", r, 2)
	// MPMD over ssh: each rank's remote command runs its own program.
	r = run(t, 60*time.Second, []string{"WEFT_SSH=" + ssh}, fab, "-n", "1", "--launcher", "ssh", "--hosts", "127.0.0.1:3", "--tag-output", hello,
		":", "-n", "2", "--env", "X=a b", hello)
	checkRing(t, "fabrun ssh, MPMD", r, 3)
	if c := strings.Count(r.Stdout, "ring ok, program 1\n"); c != 2 {
		t.Errorf("MPMD over ssh: %d ranks of program 1, want 2:\n%s", c, r.Stdout)
	}
	// --output-dir: the ssh ranks' output in files here.
	odir := t.TempDir()
	r = run(t, 60*time.Second, []string{"WEFT_SSH=" + ssh}, fab, "-n", "2", "--launcher", "ssh", "--hosts", "127.0.0.1:2", "--output-dir", odir, "sh", "-c", `echo "out $PMI_RANK"`)
	for rank := range 2 {
		if b, err := os.ReadFile(filepath.Join(odir, fmt.Sprintf("rank.%d.out", rank))); r.Code != 0 || err != nil || string(b) != fmt.Sprintf("out %d\n", rank) {
			t.Errorf("--output-dir over ssh, rank %d: %q, %v; exit %d\n%s%s", rank, b, err, r.Code, r.Stdout, r.Stderr)
		}
	}
	// --wdir: the remote ranks change to it.
	r = run(t, 60*time.Second, []string{"WEFT_SSH=" + ssh}, fab, "-n", "1", "--launcher", "ssh", "--hosts", "127.0.0.1", "--wdir", "/usr", "pwd")
	if r.Code != 0 || r.Stdout != "/usr\n" {
		t.Errorf("fabrun ssh --wdir /usr pwd: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = run(t, 60*time.Second, nil, fab, "--ssh", ssh, "-n", "2", "--hosts", "root@127.0.0.1,root@localhost", "--tag-output",
		"--env", "WEFT_LOG_LEVEL=debug", hello)
	checkRing(t, "fabrun ssh, two hosts", r, 2)
	if !strings.Contains(r.Stderr, "tcp;ofi_rxm") {
		t.Errorf("ranks on different hosts did not select tcp;ofi_rxm:\n%s", r.Stderr)
	}
}

// TestSSHFailureCleansUp: a remote rank fails, fabrun kills the others, and
// no remote process (all on this machine) survives.
func TestSSHFailureCleansUp(t *testing.T) {
	ssh := startSSHD(t)
	fab, _ := binaries(t)
	mark := proctest.Marker()
	r := run(t, 60*time.Second, nil, fab, "--ssh", ssh, "-n", "3", "--hosts", "127.0.0.1:3", "--env", mark,
		"sh", "-c", `[ "$PMI_RANK" = 1 ] && { sleep 0.5; exit 3; }; sleep 30`)
	if r.Code != 3 || !strings.Contains(r.Stderr, "fabrun: rank 1 exited with status 3") {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r.Took > 15*time.Second { // the others' sleep 30 was cut short
		t.Errorf("took %v", r.Took)
	}
	if left := proctest.WaitGone(mark, 3*time.Second); len(left) > 0 {
		t.Errorf("remote processes left behind: %v", left)
	}
	// A timeout ends remote ranks the same way.
	mark = proctest.Marker()
	r = run(t, 60*time.Second, nil, fab, "--ssh", ssh, "-n", "2", "--hosts", "127.0.0.1:2", "--timeout", "1s", "--env", mark, "sleep", "30")
	if r.Code != 124 {
		t.Errorf("timeout over ssh: exit %d\n%s", r.Code, r.Stderr)
	}
	if left := proctest.WaitGone(mark, 3*time.Second); len(left) > 0 {
		t.Errorf("remote processes left behind after timeout: %v", left)
	}
}

// TestSSHSecretNotExposed: during an ssh job the job secret is in no
// process's command line (on either side of ssh: here both are this
// machine) nor in any other /proc file that users other than the owner can
// read; the ranks still get it, in their environment.
func TestSSHSecretNotExposed(t *testing.T) {
	ssh := startSSHD(t)
	fab, _ := binaries(t)
	done := filepath.Join(t.TempDir(), "done")
	cmd := exec.Command(fab, "--ssh", ssh, "--launcher", "ssh", "-n", "2", "--hosts", "127.0.0.1:2", "--tag-output",
		"sh", "-c", `echo "secret:$WEFT_PMI_SECRET"; while [ ! -e "$1" ]; do sleep 0.02; done`, "rank", done)
	var out, errb proctest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var waitErr error
	ended := false
	wait := func(d time.Duration) bool {
		if !ended {
			select {
			case waitErr = <-exited:
				ended = true
			case <-time.After(d):
			}
		}
		return ended
	}
	defer func() {
		os.WriteFile(done, nil, 0o600)
		if !wait(10 * time.Second) {
			cmd.Process.Kill()
			wait(time.Minute)
		}
	}()
	secret := regexp.MustCompile(`\[0\] secret:(\S*)\n`)
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(out.String(), "secret:") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	m := secret.FindStringSubmatch(out.String())
	if m == nil || len(m[1]) != 32 || !strings.Contains(out.String(), "[1] secret:"+m[1]+"\n") {
		t.Fatalf("ranks did not both get a job secret:\n%s%s", out.String(), errb.String())
	}
	if leaks, seen := proctest.SecretExposed(m[1]); len(leaks) > 0 || seen == 0 {
		t.Errorf("job secret readable by other users in %v (found in %d owner-only files)", leaks, seen)
	}
	os.WriteFile(done, nil, 0o600)
	if !wait(20 * time.Second) {
		t.Errorf("fabrun did not end after the ranks were released")
	} else if waitErr != nil {
		t.Errorf("fabrun: %v\n%s%s", waitErr, out.String(), errb.String())
	}
}
