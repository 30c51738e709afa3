package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// POSIX ACLs as ext4 has them (issue 8 item 4): the kernel enforces them
// for other users of a root mount (allow_other), default ACLs are
// inherited, everyday tools keep modes, and the write-back at unmount
// leaves the modes and ACLs the mount showed. Each case runs the same
// script in the mount and in a directory of the host file system and
// compares what getfacl and find report.

// mountProjectArgs is mountProject with extra `reynfs mount` flags.
func mountProjectArgs(t testing.TB, dir string, args ...string) *Mount {
	t.Helper()
	requireFUSE(t)
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &Mount{t: t, Dir: abs, Store: filepath.Join(t.TempDir(), "store"), env: testEnv(t)}
	t.Cleanup(m.cleanup)
	r := m.Run(append([]string{"mount", m.Dir, "--store", m.Store}, args...)...)
	if r.Code != 0 {
		t.Fatalf("reynfs mount %s %v: exit %d: %s%s\nlog:\n%s", m.Dir, args, r.Code, r.Stdout, r.Stderr, m.LogTail(10))
	}
	if !isMounted(m.Dir) {
		t.Fatalf("reynfs mount %s exited 0 but nothing is mounted there", m.Dir)
	}
	m.pid = m.Pid()
	return m
}

// traversable gives "other" search permission on dir and every directory
// above it (t.TempDir makes 0700 ones) so that user nobody can reach it;
// the old modes come back when the test ends.
func traversable(t testing.TB, dir string) {
	t.Helper()
	for p := dir; p != "/" && p != "."; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := st.Mode().Perm(); mode&0o001 == 0 {
			if err := os.Chmod(p, mode|0o001); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(p, mode) })
		}
	}
}

// requireNobody skips (fails in CI) unless this process can run commands
// as user nobody (65534): it must be root, with setpriv installed.
func requireNobody(t testing.TB) {
	t.Helper()
	requireTool(t, "setpriv")
	if os.Geteuid() != 0 {
		skipOrFail(t, "acting as user nobody needs root (setpriv --reuid)")
	}
}

// asNobody runs a shell command as user nobody in dir, bounded to 10 s.
func asNobody(dir, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"bash", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// shTimeout is sh with a deadline, for scripts that touch the mount.
func shTimeout(t testing.TB, dir, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in %s: %s: %v\n%s", dir, script, err, out)
	}
	return string(out)
}

// permState is every path's mode, owner, and getfacl output, sorted.
func permState(t testing.TB, dir string) string {
	t.Helper()
	return shTimeout(t, dir, `find . -printf '%M %u:%g %p\n' | LC_ALL=C sort -k3; find . ! -type l -print0 | LC_ALL=C sort -z | xargs -0 getfacl -p --absolute-names`)
}

// requireNativeACL skips (fails in CI) when the host directory cannot hold
// ACLs, since the comparison needs a native reference.
func requireNativeACL(t testing.TB, dir string) {
	t.Helper()
	requireTool(t, "setfacl")
	requireTool(t, "getfacl")
	f := filepath.Join(dir, ".acl-probe")
	writeFile(t, f, nil, 0o644)
	defer os.Remove(f)
	if out, err := exec.Command("setfacl", "-m", "u:65534:r", f).CombinedOutput(); err != nil {
		skipOrFail(t, "the host file system under %s has no ACLs: %v: %s", dir, err, out)
	}
}

// aclScript is what tools do to modes and ACLs every day. It runs under
// umask 022 in the mount and in a host directory.
const aclScript = `
umask 022
printf 'echo one\n' > run.sh; chmod 755 run.sh; sed -i s/one/two/ run.sh
printf 'x\n' > plain; chmod 640 plain
cp -p run.sh cp-p.sh; cp -a plain cp-a; cp run.sh cp.sh
touch f; mkdir d; mkdir -m 0711 d711; mkfifo fifo
setfacl -m u:65534:--- plain
touch plain2; setfacl -m u:65534:rw,g::r plain2; chmod 604 plain2
setfacl -m g::rwx f; setfacl -b f
mkdir shared; setfacl -d -m u:65534:---,g::r-x,o::r-x shared; setfacl -m u:65534:r-x shared
touch shared/file; mkdir shared/sub; mkdir -m 0700 shared/priv; touch shared/sub/deep; mkfifo shared/fifo
(umask 077; touch shared/umask077; touch umask077)
mkdir min; setfacl -d -m u::rwx,g::r-x,o::--- min; touch min/f; mkdir min/d
cp -a shared shared-cp-a
rsync -aA shared/ shared-rsync/
sed -i s/two/three/ shared/file 2>/dev/null || true
chmod 750 shared/sub
`

func TestACLTools(t *testing.T) {
	requireTool(t, "rsync")
	native := t.TempDir()
	requireNativeACL(t, native)
	proj := t.TempDir()
	m := mountProject(t, proj)
	shTimeout(t, native, aclScript)
	shTimeout(t, m.Dir, aclScript)
	want := permState(t, native)
	if got := permState(t, m.Dir); got != want {
		t.Errorf("modes and ACLs in the mount differ from the host directory:\n%s", lineDiff(want, got))
	}
	m.Unmount()
	if got := permState(t, proj); got != want {
		t.Errorf("after the write-back, modes and ACLs differ from the host directory:\n%s", lineDiff(want, got))
	}
}

// TestACLDeny: as user nobody against a root mount, an ACL entry that
// denies nobody denies, also for a file created in a directory with such
// a default ACL, while the same modes without the entry let nobody read.
func TestACLDeny(t *testing.T) {
	requireNobody(t)
	requireTool(t, "setfacl")
	proj := t.TempDir()
	if err := os.Chmod(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	traversable(t, proj)
	m := mountProject(t, proj)
	shTimeout(t, m.Dir, `umask 022
echo open > open; echo secret > secret; setfacl -m u:65534:--- secret
mkdir shared; setfacl -d -m u:65534:--- shared
echo inherited > shared/file; mkdir shared/sub; echo deep > shared/sub/deep`)
	if out, err := asNobody(m.Dir, "cat open"); err != nil || out != "open\n" {
		t.Fatalf("nobody cannot read a 0644 file in the mount (the test cannot tell a denial): %q, %v", out, err)
	}
	for _, p := range []string{"secret", "shared/file", "shared/sub/deep"} {
		out, err := asNobody(m.Dir, "cat "+p)
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("nobody reads %s despite u:nobody:--- (ACL not enforced or not inherited): %q, %v", p, out, err)
		}
	}
	if out, err := asNobody(m.Dir, "echo x >> open"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("nobody appends to a 0644 root file: %q, %v", out, err)
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(got, "\n") {
		count[l]++
	}
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if count[l] > 0 {
			count[l]--
			continue
		}
		b.WriteString("- " + l + "\n")
	}
	for _, l := range strings.Split(got, "\n") {
		if count[l] > 0 {
			count[l]--
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
