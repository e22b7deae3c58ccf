// Package nodemem tells how much memory the node gives this process and
// how much of it is free now: the memory limit of the process's cgroup
// (v2 memory.max, v1 memory.limit_in_bytes, the tightest on the way to the
// root: a container, a systemd MemoryMax=) or else the machine's memory,
// the memory still available under that limit, and the kernel's memory
// pressure (PSI). The cache sizes its RAM from the first and gives memory
// back when the others say the node needs it.
package nodemem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Node reads the memory facts of the node from a file system root: "/"
// in production, a directory holding a fake proc/ and sys/fs/cgroup/ in
// tests. The zero Node reads "/".
type Node struct {
	Root string
}

func (n Node) path(p string) string {
	if n.Root == "" {
		return p
	}
	return filepath.Join(n.Root, p)
}

// Limit is the memory the node gives the process.
type Limit struct {
	Bytes int64
	// From says where the figure comes from, for logs: "cgroup v2
	// memory.max of /system.slice/hepcache.service", "MemTotal".
	From string
	// cgroup is the cgroup directory holding the limit ("" for MemTotal);
	// v1 marks a cgroup v1 memory controller.
	cgroup string
	v1     bool
}

// unlimited is what cgroup v1 reports for no limit (the page-rounded
// maximum); any figure above the machine's memory means no limit too.
const unlimited = 1 << 62

// Limit returns the smaller of the machine's memory and the tightest
// cgroup memory limit on the process's cgroup path.
func (n Node) Limit() (Limit, error) {
	mi, err := n.meminfo()
	if err != nil {
		return Limit{}, err
	}
	best := Limit{Bytes: mi["MemTotal"], From: "MemTotal"}
	for _, cg := range n.cgroups() {
		for dir := cg.dir; ; dir = filepath.Dir(dir) {
			if v, ok := readInt(dir, cg.limitFile); ok && v > 0 && v < best.Bytes && v < unlimited {
				rel := strings.TrimPrefix(dir, cg.mount)
				if rel == "" {
					rel = "/"
				}
				best = Limit{Bytes: v, From: fmt.Sprintf("cgroup %s %s of %s", cg.version, cg.limitFile, rel), cgroup: dir, v1: cg.version == "v1"}
			}
			if dir == cg.mount || dir == "/" || dir == "." {
				break
			}
		}
	}
	return best, nil
}

// Available returns the memory that could still be used without pressure:
// the machine's MemAvailable, and under a cgroup limit the limit less what
// the cgroup uses beyond its reclaimable page cache, whichever is less.
func (n Node) Available(l Limit) (int64, error) {
	mi, err := n.meminfo()
	if err != nil {
		return 0, err
	}
	avail, ok := mi["MemAvailable"]
	if !ok {
		avail = mi["MemFree"] + mi["Cached"]
	}
	if l.cgroup == "" {
		return avail, nil
	}
	usageFile, fileKey := "memory.current", "inactive_file"
	if l.v1 {
		usageFile, fileKey = "memory.usage_in_bytes", "total_inactive_file"
	}
	used, ok := readInt(l.cgroup, usageFile)
	if !ok {
		return avail, nil
	}
	st := readKV(filepath.Join(l.cgroup, "memory.stat"))
	return min(avail, l.Bytes-max(0, used-st[fileKey])), nil
}

// Stall is PSI's "some" line for memory: how long some task waited for
// memory.
type Stall struct {
	// Avg10 is the share of the last ten seconds (0-100). It decays
	// slowly: a stall of a second keeps it high for several more.
	Avg10 float64
	// Total is the time stalled since boot, counted as it happens: its
	// growth between two reads is the stall between them.
	Total time.Duration
}

// Pressure returns PSI's "some" stall for memory of the process's cgroup
// (v2), else of the whole machine; ok is false where the kernel has no
// PSI.
func (n Node) Pressure() (s Stall, ok bool) {
	var files []string
	for _, cg := range n.cgroups() {
		if cg.version == "v2" {
			files = append(files, filepath.Join(cg.dir, "memory.pressure"))
		}
	}
	files = append(files, n.path("/proc/pressure/memory"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "some ") {
				continue
			}
			for _, w := range strings.Fields(line) {
				if v, found := strings.CutPrefix(w, "avg10="); found {
					if x, err := strconv.ParseFloat(v, 64); err == nil {
						s.Avg10, ok = x, true
					}
				}
				if v, found := strings.CutPrefix(w, "total="); found {
					if us, err := strconv.ParseInt(v, 10, 64); err == nil {
						s.Total = time.Duration(us) * time.Microsecond
					}
				}
			}
			if ok {
				return s, true
			}
		}
	}
	return Stall{}, false
}

// cgroupDir is one cgroup of the process with its memory controller.
type cgroupDir struct {
	version   string // "v1" or "v2"
	mount     string // the hierarchy's mount point
	dir       string // the process's cgroup in it
	limitFile string
}

// cgroups lists the process's memory cgroups from /proc/self/cgroup: the
// v2 one (mounted at /sys/fs/cgroup, or /sys/fs/cgroup/unified in hybrid
// mode) and the v1 memory controller's.
func (n Node) cgroups() []cgroupDir {
	b, err := os.ReadFile(n.path("/proc/self/cgroup"))
	if err != nil {
		return nil
	}
	var out []cgroupDir
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			for _, m := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
				mount := n.path(m)
				if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err == nil {
					out = append(out, cgroupDir{version: "v2", mount: mount, dir: filepath.Join(mount, parts[2]), limitFile: "memory.max"})
					break
				}
			}
		case containsWord(parts[1], "memory"):
			mount := n.path("/sys/fs/cgroup/memory")
			out = append(out, cgroupDir{version: "v1", mount: mount, dir: filepath.Join(mount, parts[2]), limitFile: "memory.limit_in_bytes"})
		}
	}
	return out
}

func containsWord(list, w string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == w {
			return true
		}
	}
	return false
}

// readInt reads a cgroup file holding one number ("max": none).
func readInt(dir, name string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return v, err == nil
}

// readKV reads "key value" lines (memory.stat).
func readKV(name string) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open(name)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if x, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = x
		}
	}
	return out
}

// meminfo reads /proc/meminfo in bytes.
func (n Node) meminfo() (map[string]int64, error) {
	f, err := os.Open(n.path("/proc/meminfo"))
	if err != nil {
		return nil, fmt.Errorf("nodemem: %w", err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		x, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fs) > 1 && fs[1] == "kB" {
			x <<= 10
		}
		out[k] = x
	}
	if out["MemTotal"] <= 0 {
		return nil, errors.New("nodemem: no MemTotal in /proc/meminfo")
	}
	return out, sc.Err()
}
