// Package realclient runs the real XRootD clients (xrdcp, xrdfs, the Python
// bindings, uproot) and the hepcache binary from tests, with a clean
// environment. A missing tool fails the test when CI=true and skips it
// otherwise, so that interop tests never pass by not running.
package realclient

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Interpreters with XRootD bindings.
const (
	// DebianPython is Debian's python3 with python3-xrootd (5.5.3 bindings).
	DebianPython = "/usr/bin/python3"
	// defaultVenv is the venv .ci/run creates: uproot, fsspec-xrootd and
	// PyPI's XRootD bindings (6.x), which shadow Debian's inside it.
	defaultVenv = "/opt/hepvenv/bin/python"
	// ProxyPlugin is the XrdCl plugin that rewrites root://site//path to
	// root://proxy//root://site//path (seed 000's client setup).
	ProxyPlugin = "/usr/lib/x86_64-linux-gnu/libXrdClProxyPlugin-5.so"
)

// DefaultTimeout bounds every command run by Run and RunPython.
const DefaultTimeout = 3 * time.Minute

// VenvPython returns the venv interpreter: $HEPCACHE_PYTHON, else
// /opt/hepvenv/bin/python.
func VenvPython() string {
	if p := os.Getenv("HEPCACHE_PYTHON"); p != "" {
		return p
	}
	return defaultVenv
}

// InCI reports whether the tests run in CI (env CI=true), where a missing
// tool is a failure rather than a reason to skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing fails the test in CI and skips it otherwise.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		tb.Fatalf("%s (CI=true: required; run .ci/run to install it)", msg)
	}
	tb.Skipf("%s; skipping (set CI=true to make this a failure)", msg)
}

// RequireRoot fails the test in CI (which runs as root) and skips it
// otherwise when the test does not run as root; why says what needs it.
func RequireRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if InCI() {
		tb.Fatalf("not root: %s (CI=true: required; CI runs as root)", why)
	}
	tb.Skipf("not root: %s; skipping (set CI=true to make this a failure)", why)
}

// Require returns the path of the executable name (e.g. "xrdcp"), failing
// or skipping the test when it is not installed.
func Require(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, "%s not found: %v", name, err)
	}
	return p
}

// RequireFile fails or skips the test when path does not exist.
func RequireFile(tb testing.TB, path string) string {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(tb, "%s: %v", path, err)
	}
	return path
}

// Python returns python if it exists and can import every module
// (e.g. "XRootD.client", "uproot"), failing or skipping the test otherwise.
func Python(tb testing.TB, python string, modules ...string) string {
	tb.Helper()
	if _, err := os.Stat(python); err != nil {
		Missing(tb, "python %s: %v", python, err)
	}
	if len(modules) == 0 {
		return python
	}
	code := "import " + strings.Join(modules, ", ")
	out, err := exec.Command(python, "-c", code).CombinedOutput()
	if err != nil {
		Missing(tb, "%s cannot %q: %v: %s", python, code, err, bytes.TrimSpace(out))
	}
	return python
}

// Env returns the environment for a client: the test's environment without
// any XRD_* / XROOT* setting that could change client behaviour, plus
// settings that make failures quick, then extra ("KEY=value") on top.
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "XRD_") || strings.HasPrefix(k, "XROOT") || k == "BEARER_TOKEN" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"XRD_CONNECTIONRETRY=1",  // a refused connection fails at once
		"XRD_REQUESTTIMEOUT=120", // seconds, bounded by DefaultTimeout anyway
		// With the default 15 s resolution, XrdCl 5.5.3 processes often
		// hang about 5 s at exit when many run at once (seen with 16
		// concurrent xrdcp); 1 s avoids that and costs nothing.
		"XRD_TIMEOUTRESOLUTION=1",
	)
	return append(env, extra...)
}

// Result is the outcome of one command.
type Result struct {
	Cmd    string
	Stdout []byte
	Stderr []byte
	Err    error
}

// String describes the result for test failure messages.
func (r Result) String() string {
	return fmt.Sprintf("%s: err=%v\nstdout:\n%s\nstderr:\n%s", r.Cmd, r.Err, trim(r.Stdout), trim(r.Stderr))
}

func trim(b []byte) string {
	const max = 4000
	if len(b) > max {
		return string(b[:max]) + fmt.Sprintf("\n... (%d more bytes)", len(b)-max)
	}
	return string(b)
}

// Run runs name with args and env (from Env) within DefaultTimeout and
// returns what it printed. It does not fail the test: callers decide what a
// failure means (error tests expect one).
func Run(tb testing.TB, env []string, name string, args ...string) Result {
	tb.Helper()
	return RunIn(tb, context.Background(), env, nil, name, args...)
}

// RunIn is Run with a context and standard input.
func RunIn(tb testing.TB, ctx context.Context, env []string, stdin []byte, name string, args ...string) Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (timeout %s)", err, DefaultTimeout)
	}
	return Result{Cmd: name + " " + strings.Join(args, " "), Stdout: out.Bytes(), Stderr: errb.Bytes(), Err: err}
}

// MustRun is Run that fails the test when the command fails.
func MustRun(tb testing.TB, env []string, name string, args ...string) Result {
	tb.Helper()
	r := Run(tb, env, name, args...)
	if r.Err != nil {
		tb.Fatalf("%v", r)
	}
	return r
}

// RunPython runs script (Python source) with python; args are available
// as sys.argv[1:].
func RunPython(tb testing.TB, env []string, python, script string, args ...string) Result {
	tb.Helper()
	return Run(tb, env, python, append([]string{"-c", script}, args...)...)
}

// MustRunPython is RunPython that fails the test when the script fails.
func MustRunPython(tb testing.TB, env []string, python, script string, args ...string) Result {
	tb.Helper()
	r := RunPython(tb, env, python, script, args...)
	if r.Err != nil {
		tb.Fatalf("%v", r)
	}
	return r
}

// Tmpfs mounts a tmpfs of size ("64m") at a new directory and unmounts it
// (lazily) when the test ends; its root is 0755, as a disk's own file
// system's (a tmpfs's is 1777, which hepcache refuses as a cache or data
// directory: disk.OpenTrusted): a real disk a test can turn read-only or
// unmount. Mounting needs root: without it the test fails in CI and is
// skipped elsewhere, like a missing tool.
func Tmpfs(tb testing.TB, size string) string {
	tb.Helper()
	return mount(tb, "tmpfs", "size="+size+",mode=0755")
}

// Ramfs mounts a ramfs (a file system that refuses O_DIRECT) at a new
// directory, like Tmpfs.
func Ramfs(tb testing.TB) string {
	tb.Helper()
	return mount(tb, "ramfs", "mode=0755")
}

func mount(tb testing.TB, fstype, opts string) string {
	tb.Helper()
	d := tb.TempDir()
	args := []string{"-t", fstype}
	if opts != "" {
		args = append(args, "-o", opts)
	}
	if out, err := exec.Command("mount", append(args, fstype, d)...).CombinedOutput(); err != nil {
		Missing(tb, "mount %s (needs root): %v %s", fstype, err, out)
	}
	tb.Cleanup(func() { exec.Command("umount", "-l", d).Run() })
	return d
}
