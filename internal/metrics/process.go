package metrics

import (
	"github.com/hepcache/hepcache/internal/buildinfo"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/self/stat's CPU times (100 on
// every Linux platform Go supports).
const clockTicks = 100

var runtimeSamples = []string{"/sched/goroutines:goroutines", "/memory/classes/heap/objects:bytes"}

// writeProcess writes the conventional process_* and go_* metrics, so the
// proxy's memory and CPU can be plotted against its clients (seed 000,
// Tables 4-5).
func writeProcess(e *expWriter, started time.Time) {
	bi := buildinfo.Get()
	e.family("hepcache_build_info", "gauge", "The build: version, VCS revision and Go version (value 1).")
	e.sample("hepcache_build_info", `version="`+escape(bi.Version)+`",revision="`+escape(bi.Revision)+`",goversion="`+escape(bi.GoVersion)+`"`, 1)
	e.family("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch.")
	e.sampleFloat("process_start_time_seconds", "", float64(started.UnixNano())/1e9)
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		// Fields after the command name, which is in parentheses and may
		// contain spaces: utime and stime are fields 14 and 15.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 13 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				e.family("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.")
				e.sampleFloat("process_cpu_seconds_total", "", float64(ut+st)/clockTicks)
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			e.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
			e.sample("process_resident_memory_bytes", "", pages*int64(os.Getpagesize()))
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		e.family("process_open_fds", "gauge", "Open file descriptors.")
		e.sample("process_open_fds", "", int64(len(ents)))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		e.family("process_max_fds", "gauge", "Maximum number of open file descriptors (the soft RLIMIT_NOFILE).")
		e.sample("process_max_fds", "", int64(min(rl.Cur, 1<<62)))
	}
	s := make([]metrics.Sample, len(runtimeSamples))
	for i, n := range runtimeSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		e.family("go_goroutines", "gauge", "Goroutines that currently exist.")
		e.sample("go_goroutines", "", int64(s[0].Value.Uint64()))
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		e.family("go_memstats_heap_alloc_bytes", "gauge", "Heap bytes allocated and still in use.")
		e.sample("go_memstats_heap_alloc_bytes", "", int64(s[1].Value.Uint64()))
	}
}
