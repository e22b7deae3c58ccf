package bench

// The analysis jobs of the workflow benchmark: the go-hep job (hepcache's
// root:// client and groot) and the same analysis with uproot over XrdCl,
// directly or through XrdCl's proxy plugin (seed 000's set-up).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/bench/ttbar"
)

// Analysis jobs.
const (
	jobGoHEP  = "go-hep"
	jobUproot = "uproot"
	// jobProxy is the uproot job with XRD_PLUGIN/XROOT_PROXY set: XrdCl
	// turns root://site//path into root://cache//root://site//path and the
	// cache runs in forwarding mode.
	jobProxy = "xrdcl-proxy"
)

var jobKinds = []string{jobGoHEP, jobUproot, jobProxy}

// XRootD bindings (and so XrdCl versions) for the Python jobs.
const (
	// xrdclVenv is whatever the interpreter imports: in .ci/install's venv,
	// PyPI's xrootd 6 with its own XrdCl and proxy plugin.
	xrdclVenv = "venv"
	// xrdclDebian is Debian's python3-xrootd 5.5.3 (the XrdCl of XCache
	// 5.5.3 and of seed 000's days) put in front of the venv's.
	xrdclDebian = "debian"

	debianDistPackages = "/usr/lib/python3/dist-packages"
	// debianProxyPlugin is Debian's XrdClProxyPlugin (xrootd-client-plugins),
	// loadable only by XrdCl 5.
	debianProxyPlugin = "/usr/lib/x86_64-linux-gnu/libXrdClProxyPlugin-5.so"
	defaultPython     = "/opt/hepvenv/bin/python"
)

// DefaultPython is the interpreter of the Python jobs: $HEPCACHE_PYTHON,
// else the venv .ci/install creates.
func DefaultPython() string {
	if p := os.Getenv("HEPCACHE_PYTHON"); p != "" {
		return p
	}
	return defaultPython
}

// pythonModules are what the uproot job imports.
const pythonModules = "uproot, awkward, numpy, fsspec_xrootd, XRootD.client"

// PythonJobError says why python cannot run the uproot job (nil if it can).
func PythonJobError(python string) error {
	out, err := exec.Command(python, "-c", "import "+pythonModules).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s cannot import %s (.ci/install creates such a venv): %w: %s", python, pythonModules, err, lastLine(out))
	}
	return nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// pyEnv is one way of running the Python jobs: interpreter, script,
// bindings and the proxy plugin their XrdCl can load.
type pyEnv struct {
	python, script string
	// pythonPath puts Debian's bindings first (xrdclDebian).
	pythonPath string
	// plugin is the XrdClProxyPlugin of the bindings' XrdCl major version.
	plugin string
	// label names the libraries, for the report.
	label string
}

// newPyEnv checks that python runs the uproot job with the bindings xrdcl
// names and writes the job's script into dir.
func newPyEnv(python, xrdcl, dir string) (*pyEnv, error) {
	if err := PythonJobError(python); err != nil {
		return nil, err
	}
	e := &pyEnv{python: python}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	switch xrdcl {
	case xrdclVenv:
	case xrdclDebian:
		// A directory holding only Debian's two binding packages, so that
		// nothing else of dist-packages shadows the venv's.
		shim := filepath.Join(dir, "xrootd-debian")
		if err := os.Mkdir(shim, 0o755); err != nil && !os.IsExist(err) {
			return nil, err
		}
		for _, pkg := range []string{"XRootD", "pyxrootd"} {
			src := filepath.Join(debianDistPackages, pkg)
			if _, err := os.Stat(src); err != nil {
				return nil, fmt.Errorf("Debian XRootD bindings (python3-xrootd): %w", err)
			}
			link := filepath.Join(shim, pkg)
			os.Remove(link)
			if err := os.Symlink(src, link); err != nil {
				return nil, err
			}
		}
		e.pythonPath = shim
	default:
		return nil, fmt.Errorf("unknown XRootD bindings %q (have %s, %s)", xrdcl, xrdclVenv, xrdclDebian)
	}
	// The bindings' version and directory: XrdCl 6 needs the plugin built
	// with it (PyPI ships it next to the bindings), XrdCl 5 Debian's.
	const probe = `import importlib.metadata as md, os, pyxrootd, uproot, awkward
d = os.path.dirname(os.path.realpath(pyxrootd.__file__))
v = [x.version for x in md.distributions(path=[os.path.dirname(d)]) if (x.metadata["Name"] or "").lower() == "xrootd"]
print(d, v[0] if v else "?", uproot.__version__, awkward.__version__)`
	cmd := exec.Command(python, "-c", probe)
	cmd.Env = e.environ("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s with the %s bindings: %w: %s", python, xrdcl, err, lastLine(out))
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		return nil, fmt.Errorf("%s: unexpected probe output %q", python, out)
	}
	dirBindings, version := f[0], f[1]
	e.label = fmt.Sprintf("uproot %s, awkward %s, fsspec-xrootd, XrdCl %s (%s bindings)", f[2], f[3], version, xrdcl)
	e.plugin = debianProxyPlugin
	if !strings.HasPrefix(version, "5.") {
		e.plugin = filepath.Join(dirBindings, "libXrdClProxyPlugin-"+strings.Split(version, ".")[0]+".so")
	}
	// XrdCl goes on without a plugin it cannot load: the job would read
	// directly while the report says "through the cache".
	if _, err := os.Stat(e.plugin); err != nil {
		return nil, fmt.Errorf("proxy plugin for XrdCl %s: %w", version, err)
	}
	if e.script, err = ttbar.WriteUprootJob(dir); err != nil {
		return nil, err
	}
	return e, nil
}

// environ is the jobs' environment: the parent's without any XRootD client
// setting, plus the bindings' path and, with proxy ("root://host:port"),
// the proxy plugin sending every File operation to it.
func (e *pyEnv) environ(proxy string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "XRD_") || strings.HasPrefix(k, "XROOT") || k == "PYTHONPATH" {
			continue
		}
		env = append(env, kv)
	}
	// See xrdcp: XrdCl's default 15 s timeout resolution can stall exits.
	env = append(env, "XRD_TIMEOUTRESOLUTION=1")
	if e.pythonPath != "" {
		env = append(env, "PYTHONPATH="+e.pythonPath)
	}
	if proxy != "" {
		env = append(env, "XRD_PLUGIN="+e.plugin, "XROOT_PROXY="+proxy+"//",
			// XrdCl 5.5.3's proxy plugin lacks pgread.
			"XRD_CPUSEPGWRTRD=0")
	}
	return env
}

// jobRunner runs one kind of analysis job as a child process.
type jobRunner struct {
	kind string
	bin  string // hepcache, for the go-hep job
	py   *pyEnv // the Python jobs
	opts jobOpts
}

// run runs the job on input (a path or root:// URL) over its first n
// events; proxy is the cache the proxy plugin sends the xrdcl-proxy job to.
func (j *jobRunner) run(ctx context.Context, input string, n int64, proxy string) (*jobResult, error) {
	if j.kind == jobGoHEP {
		return runJob(ctx, j.bin, input, n, j.opts)
	}
	args := []string{j.py.script, "ttbar", "--input", input, "--events", strconv.FormatInt(n, 10),
		"--work", strconv.Itoa(max(j.opts.Work, 1))}
	if j.opts.Hist != "" {
		args = append(args, "--hist", j.opts.Hist)
	}
	if j.kind != jobProxy {
		proxy = ""
	}
	var r jobResult
	wall, pid, err := runPython(ctx, j.py, proxy, args, &r.Timings)
	if err != nil {
		return nil, fmt.Errorf("%s job %s (%d events): %w", j.kind, input, n, err)
	}
	r.ProcessSeconds, r.PID = wall, pid
	return &r, nil
}

// runPython runs the uproot job with args and decodes its JSON into out.
func runPython(ctx context.Context, e *pyEnv, proxy string, args []string, out any) (wall float64, pid int, err error) {
	cmd := exec.CommandContext(ctx, e.python, args...)
	cmd.Env = e.environ(proxy)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start).Seconds()
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %s", err, tail(stderr.Bytes(), 2000))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return 0, 0, fmt.Errorf("bad JSON %q: %w", tail(stdout.Bytes(), 500), err)
	}
	return wall, cmd.Process.Pid, nil
}

func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// copyInput is copy2scratch's download: xrdcp to dst, for the xrdcl-proxy
// job through the proxy plugin. Debian's xrdcp is XrdCl 5.5.3, so the
// plugin is Debian's; it also prefixes local destinations (XrdCl 5.5.3),
// hence the copy to stdout.
func (j *jobRunner) copyInput(ctx context.Context, url, dst, proxy string) (float64, error) {
	if j.kind != jobProxy || proxy == "" {
		return xrdcpTo(ctx, url, dst)
	}
	f, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, "xrdcp", "-s", "-f", url, "-")
	cmd.Env = append(os.Environ(), "XRD_TIMEOUTRESOLUTION=1", "XRD_PLUGIN="+debianProxyPlugin,
		"XROOT_PROXY="+proxy+"//", "XRD_CPUSEPGWRTRD=0")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("xrdcp %s - (proxy %s): %w: %s", url, proxy, err, tail(stderr.Bytes(), 500))
	}
	return time.Since(start).Seconds(), nil
}
