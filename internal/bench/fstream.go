package bench

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/monitor/decode"
)

// RequestStats is what a server's monitoring f-stream says one client
// process asked of it: the close records of the files the process opened
// (XrdXrootdMonStatOPS), summed.
type RequestStats struct {
	Files int   `json:"files"`
	Reads int64 `json:"reads"`
	// ReadVs are vector reads (kXR_readv), ReadVSegs their segments.
	ReadVs    int64 `json:"readvs"`
	ReadVSegs int64 `json:"readv_segments"`
	// Bytes is everything read, plain and vector.
	Bytes int64 `json:"bytes"`
	// ReadMax and ReadVMax are the largest single read and vector read.
	ReadMax  int64 `json:"read_max"`
	ReadVMax int64 `json:"readv_max"`
}

// Requests is the number of read requests of either kind.
func (s *RequestStats) Requests() int64 { return s.Reads + s.ReadVs }

// fstreamCollector receives one server's monitoring streams on a loopback
// UDP port. XCache sends them with `xrootd.monitor ... dest fstat`,
// hepcache with `monitor.fstream`, the C++ origin like XCache.
type fstreamCollector struct {
	pc  net.PacketConn
	col *decode.Collector
}

func newFStreamCollector() (*fstreamCollector, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("f-stream collector: %w", err)
	}
	c := &fstreamCollector{pc: pc, col: decode.NewCollector()}
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return // closed
			}
			c.col.Add(bytes.Clone(buf[:n]))
		}
	}()
	return c, nil
}

func (c *fstreamCollector) addr() string { return c.pc.LocalAddr().String() }

func (c *fstreamCollector) close() { c.pc.Close() }

// fstreamFlush is how long the servers keep records before sending them.
const fstreamFlush = time.Second

// xcacheMonitorConfig are the XCache and origin lines that send close
// records with operation counts to addr every fstreamFlush. Without "xfr"
// XRootD 5.5.3 sends the open and disc records of a file but not its
// close (seen here with xrdcp).
func xcacheMonitorConfig(addr string) []string {
	return []string{"xrootd.monitor all flush 1s window 1s fstat 1s lfn ops xfr 1 dest fstat info user " + addr}
}

// forPID waits until the server has reported closing a file that the
// client process pid opened (at most timeout: records leave servers every
// fstreamFlush) and sums every closed file of that process.
func (c *fstreamCollector) forPID(pid int, timeout time.Duration) (*RequestStats, error) {
	want := strconv.Itoa(pid)
	deadline := time.Now().Add(timeout)
	for {
		var s RequestStats
		for _, f := range c.col.Files() {
			if !f.Closed || f.User.Pid != want {
				continue
			}
			s.Files++
			s.Bytes += f.Read + f.ReadV
			if f.Ops != nil {
				s.Reads += int64(f.Ops.Read)
				s.ReadVs += int64(f.Ops.ReadV)
				s.ReadVSegs += f.Ops.RSegs
				s.ReadMax = max(s.ReadMax, int64(f.Ops.RdMax))
				s.ReadVMax = max(s.ReadVMax, int64(f.Ops.RvMax))
			}
		}
		if s.Files > 0 {
			return &s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no f-stream close record from client pid %d within %s (seen: %s)", pid, timeout, c.describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// describe summarises the files seen, for errors: how many, and the last
// few with their clients.
func (c *fstreamCollector) describe() string {
	files := c.col.Files()
	var parts []string
	for _, f := range files[max(0, len(files)-3):] {
		parts = append(parts, fmt.Sprintf("%s by %s/%s.%s closed=%v", f.LFN, f.User.Prot, f.User.Name, f.User.Pid, f.Closed))
	}
	s := fmt.Sprintf("%d files", len(files))
	if len(parts) > 0 {
		s += ", the last " + strings.Join(parts, "; ")
	}
	if err := c.col.Err(); err != nil {
		s += "; decode errors: " + err.Error()
	}
	return s
}
