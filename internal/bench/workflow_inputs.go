package bench

// The workflow benchmark's real-file run (--inputs DIR): ROOT files written
// by C++ ROOT (go-hep's own test files, for one) read whole by the uproot
// job through each access path, each file's content compared with its read
// from local disk.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/bench/ttbar"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// InputsRead is one uproot process reading every input file.
type InputsRead struct {
	// Config is "local", "direct", "<cache>-cold" or "<cache>-hot".
	Config string `json:"config"`
	// Seconds is the process's wall time, ReadSeconds the files' reads.
	Seconds     float64            `json:"seconds"`
	ReadSeconds float64            `json:"read_s"`
	Files       []ttbar.FileDigest `json:"files"`
}

// InputsResult is the real-file run's outcome.
type InputsResult struct {
	Dir    string       `json:"dir"`
	Files  []string     `json:"files"`
	Bytes  int64        `json:"bytes"`
	Site   *SiteLink    `json:"site"`
	Client string       `json:"client"`
	Reads  []InputsRead `json:"reads"`
	// Unstable lists the keys whose two local reads differed: uproot does
	// not read them reproducibly, so they are left out of the comparison.
	Unstable []string `json:"unstable"`
	// Mismatches lists every file whose read differs from the local one.
	Mismatches []string  `json:"mismatches"`
	Started    time.Time `json:"started"`
	Seconds    float64   `json:"total_seconds"`
}

func workflowInputs(ctx context.Context, cfg WorkflowConfig) error {
	_, err := WorkflowInputs(ctx, cfg)
	return err
}

// WorkflowInputs runs the real-file run of cfg.Inputs (cfg as Workflow's):
// the uproot job reads every *.root file under it locally, directly from
// the farthest of cfg.Sites and through each cache cold and hot, and each
// read's digest must equal the local one's. It writes workflow-inputs.json
// and workflow-inputs.md into cfg.Dir and fails if any file differs.
func WorkflowInputs(ctx context.Context, cfg WorkflowConfig) (*InputsResult, error) {
	if err := cfg.ensureDefaults(); err != nil {
		return nil, err
	}
	progress := progressFunc(cfg.Progress, "workflow --inputs")
	res := &InputsResult{Dir: cfg.Inputs, Started: time.Now()}
	dataDir := filepath.Join(cfg.Dir, "origin")
	if err := os.RemoveAll(filepath.Join(dataDir, "inputs")); err != nil {
		return nil, err
	}
	err := filepath.WalkDir(cfg.Inputs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".root") {
			return err
		}
		rel, err := filepath.Rel(cfg.Inputs, p)
		if err != nil {
			return err
		}
		n, err := copyFile(p, filepath.Join(dataDir, "inputs", rel))
		res.Files = append(res.Files, rel)
		res.Bytes += n
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bench workflow --inputs %s: %w", cfg.Inputs, err)
	}
	if len(res.Files) == 0 {
		return nil, fmt.Errorf("bench workflow --inputs %s: no *.root file", cfg.Inputs)
	}
	progress("%d ROOT files, %.1f MB, from %s", len(res.Files), float64(res.Bytes)/1e6, cfg.Inputs)
	py, err := newPyEnv(cfg.Python, cfg.xrdclFor(jobUproot), filepath.Join(cfg.Dir, "python-inputs"))
	if err != nil {
		return nil, fmt.Errorf("bench workflow --inputs: %w", err)
	}
	res.Client = py.label

	read := func(config string, url func(rel string) string) (*InputsRead, error) {
		args := []string{py.script, "dump"}
		for _, f := range res.Files {
			args = append(args, "--input", url(f))
		}
		var d ttbar.Dump
		wall, _, err := runPython(ctx, py, "", args, &d)
		if err != nil {
			return nil, fmt.Errorf("uproot reading the inputs, %s: %w", config, err)
		}
		if len(d.Files) != len(res.Files) {
			return nil, fmt.Errorf("uproot reading the inputs, %s: %d results for %d files", config, len(d.Files), len(res.Files))
		}
		r := InputsRead{Config: config, Seconds: wall, ReadSeconds: d.WallSeconds, Files: d.Files}
		res.Reads = append(res.Reads, r)
		progress("%s: %d files in %.2f s", config, len(d.Files), wall)
		return &r, nil
	}
	// Twice: what differs between two reads of local disk is uproot's,
	// not the access path's.
	for _, config := range []string{"local", "local again"} {
		if _, err := read(config, func(rel string) string { return filepath.Join(dataDir, "inputs", rel) }); err != nil {
			return nil, err
		}
	}
	unstable := map[string]bool{}
	for i, f := range res.Reads[0].Files {
		again := res.Reads[1].Files[i]
		for k, d := range f.Keys {
			if again.Keys[k] != d {
				unstable[res.Files[i]+":"+k] = true
				res.Unstable = append(res.Unstable, res.Files[i]+": "+k)
			}
		}
	}
	slices.Sort(res.Unstable)

	if err := xrdproc.GiveToServerUser(dataDir); err != nil {
		return nil, err
	}
	origin, err := xrdproc.StartOrigin(dataDir)
	if err != nil {
		return nil, err
	}
	defer origin.Remove()
	links, closeLinks, err := openLinks(ctx, cfg.Sites[len(cfg.Sites)-1:], origin.Addr, cfg.Bandwidth, progress)
	if err != nil {
		return nil, err
	}
	defer closeLinks()
	site := links[0]
	res.Site = site
	at := func(base string) func(string) string {
		return func(rel string) string { return base + "//inputs/" + filepath.ToSlash(rel) }
	}
	if _, err := read("direct", at("root://"+site.Addr)); err != nil {
		return nil, err
	}
	for i, kind := range cfg.Caches {
		c, err := startCacheProc(kind, cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-inputs-%s-%d", kind, i)), site.Addr, cfg.CacheFlags)
		if err != nil {
			return nil, err
		}
		_, err = read(kind+"-cold", at(c.url()))
		if err == nil {
			_, err = read(kind+"-hot", at(c.url()))
		}
		c.stop()
		if err != nil {
			return nil, err
		}
	}

	ref := res.Reads[0].Files
	for _, r := range res.Reads[1:] {
		for i, f := range r.Files {
			if !sameDigest(f, ref[i], res.Files[i], unstable) {
				res.Mismatches = append(res.Mismatches, fmt.Sprintf("%s %s: %s, local %s", r.Config, res.Files[i], digestLabel(f), digestLabel(ref[i])))
			}
		}
	}
	res.Seconds = time.Since(res.Started).Seconds()
	md := res.markdown()
	if err := writeResults(cfg.Dir, "workflow-inputs", res, md, nil); err != nil {
		return nil, err
	}
	cfg.Out.Write(md)
	if len(res.Mismatches) > 0 {
		return res, fmt.Errorf("bench workflow --inputs: %d reads differ from the local read: %s", len(res.Mismatches), strings.Join(res.Mismatches, "; "))
	}
	progress("results in %s (%.0f s)", cfg.Dir, res.Seconds)
	return res, nil
}

// sameDigest compares two reads of file: the same content key by key
// (leaving out the unstable "file:key"s), or the same failure to open it
// (its message names the URL, its type does not).
func sameDigest(a, b ttbar.FileDigest, file string, unstable map[string]bool) bool {
	if a.Error != "" || b.Error != "" {
		ta, _, _ := strings.Cut(a.Error, ":")
		tb, _, _ := strings.Cut(b.Error, ":")
		return ta == tb && a.Error != "" && b.Error != ""
	}
	if len(a.Keys) != len(b.Keys) || a.Trees != b.Trees || a.Branches != b.Branches || a.Failed != b.Failed {
		return false
	}
	for k, d := range a.Keys {
		if b.Keys[k] != d && !unstable[file+":"+k] {
			return false
		}
	}
	return true
}

func digestLabel(f ttbar.FileDigest) string {
	if f.Error != "" {
		return "error " + f.Error
	}
	return fmt.Sprintf("sha256 %.12s (%d trees, %d branches, %d failures)", f.SHA256, f.Trees, f.Branches, f.Failed)
}

func (r *InputsResult) markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "## Workflow benchmark, real files: %d ROOT files written by C++ ROOT, read whole by the uproot job\n\n", len(r.Files))
	fmt.Fprintf(&b, "Files: every *.root under %s (%.1f MB). Client: %s. Site: %s (RTT %.2f ms). "+
		"Each read opens every key of every file (every TTree branch as arrays, other objects as their bytes) and hashes it; "+
		"each file's digest must equal the local read's.\n\n", r.Dir, float64(r.Bytes)/1e6, r.Client, r.Site.Name, r.Site.MeasuredMS)
	unstable := map[string]bool{}
	for _, u := range r.Unstable {
		file, key, _ := strings.Cut(u, ": ")
		unstable[file+":"+key] = true
	}
	head := []string{"file", "size", "trees", "branches", "unreadable by uproot"}
	for _, rd := range r.Reads[2:] {
		head = append(head, rd.Config)
	}
	var rows [][]string
	ref := r.Reads[0].Files
	for i, name := range r.Files {
		f := ref[i]
		row := []string{name, fmtBytes(float64(f.Size)), fmt.Sprint(f.Trees), fmt.Sprint(f.Branches), fmt.Sprint(f.Failed)}
		if f.Error != "" {
			e, _, _ := strings.Cut(f.Error, ":")
			row = []string{name, "–", "–", "–", "file: " + e}
		}
		for _, rd := range r.Reads[2:] {
			if sameDigest(rd.Files[i], f, name, unstable) {
				row = append(row, "=")
			} else {
				row = append(row, "**differs**")
			}
		}
		rows = append(rows, row)
	}
	mdTable(&b, head, rows)
	rows = nil
	for _, rd := range r.Reads {
		var bytes, reqs int64
		for _, f := range rd.Files {
			bytes, reqs = bytes+f.BytesRead, reqs+f.Reads
		}
		rows = append(rows, []string{rd.Config, fmtSeconds(rd.Seconds), fmtSeconds(rd.ReadSeconds), fmt.Sprint(reqs), fmtBytes(float64(bytes))})
	}
	fmt.Fprintf(&b, "Time to read them all (one uproot process per row):\n\n")
	mdTable(&b, []string{"read", "process [s]", "reads [s]", "uproot requests", "bytes requested"}, rows)
	var fails []string
	for i, f := range ref {
		if len(f.Failures) > 0 {
			fails = append(fails, fmt.Sprintf("%s (%s)", r.Files[i], strings.Join(f.Failures, ", ")))
		}
	}
	if len(fails) > 0 {
		fmt.Fprintf(&b, "What uproot %s could not read, on every path alike (so part of each digest): %s.\n\n", r.uprootVersion(), strings.Join(fails, "; "))
	}
	if len(r.Unstable) > 0 {
		fmt.Fprintf(&b, "Left out of the comparison, because two reads of local disk gave different arrays (uproot %s does not read them reproducibly): %s.\n\n", r.uprootVersion(), strings.Join(r.Unstable, ", "))
	}
	if len(r.Mismatches) == 0 {
		fmt.Fprintf(&b, "Every read of every file equals the local read.\n\n")
	} else {
		fmt.Fprintf(&b, "**%d reads differ from the local read.**\n\n", len(r.Mismatches))
	}
	return b.Bytes()
}

// copyFile copies src to dst (parents created) and returns the bytes.
func copyFile(src, dst string) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func (r *InputsResult) uprootVersion() string {
	v, _, _ := strings.Cut(strings.TrimPrefix(r.Client, "uproot "), ",")
	return v
}
