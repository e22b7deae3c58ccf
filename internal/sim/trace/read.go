package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Format names an input format.
type Format string

// Input formats.
const (
	// FormatAuto detects the format from the first non-empty line.
	FormatAuto Format = "auto"
	// FormatHepcache is hepcache's access log: JSON lines, docs/access-log.md.
	FormatHepcache Format = "hepcache"
	// FormatCSV is comma-separated values with a header line naming columns.
	FormatCSV Format = "csv"
	// FormatGStream is XRootD's cache g-stream: JSON lines, one
	// {"event":"file_close",...} record each (XrdPfc.cc), other events skipped.
	FormatGStream Format = "gstream"
)

// ErrTooManyBad is returned (wrapped) when the share of bad lines exceeds
// Options.MaxBadFraction.
var ErrTooManyBad = errors.New("trace: too many bad lines")

const (
	defaultMaxBadFraction = 0.01 // 1 %: a few mangled lines are normal, 1 in 100 is a wrong format
	defaultMaxBadReported = 20   // enough to see the pattern without flooding the terminal
	maxLineBytes          = 1 << 20
)

// CSVColumns names the columns of a CSV trace; the first line of the file is the
// header. Empty names take the defaults (time, path, size, bytes_read, origin).
type CSVColumns struct {
	Time, Path, Size, BytesRead, Origin string
}

// Options control how a trace is read. The zero value reads any supported
// format with the default bad-line limit.
type Options struct {
	// Format of the input; zero or FormatAuto detects it.
	Format Format
	// OrderByOpen orders accesses by open time (open_time, attach_t) instead of
	// close time (time, detach_t). CSV has one time column and ignores it.
	OrderByOpen bool
	// CSV names the CSV columns; see CSVColumns.
	CSV CSVColumns
	// MaxBadFraction is the largest share of bad lines (0..1) tolerated before
	// Read fails with ErrTooManyBad. Zero means the default, 1 %; a negative
	// value tolerates none.
	MaxBadFraction float64
	// MaxBadReported caps how many bad lines are kept with line number and
	// reason in ReadInfo.BadLines (all are counted). Zero means 20.
	MaxBadReported int
	// Progress, if set, is called now and then with the input bytes consumed.
	Progress func(bytesRead int64)
}

// BadLine is one rejected input line.
type BadLine struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// ReadInfo describes what a reader saw.
type ReadInfo struct {
	Format        Format    `json:"format"`
	Lines         int       `json:"lines"`
	Accesses      int       `json:"accesses"`
	Skipped       int       `json:"skipped"` // blank lines, comments, non-file_close events
	Bad           int       `json:"bad"`
	BadLines      []BadLine `json:"bad_lines,omitempty"`
	SizeConflicts int       `json:"size_conflicts"` // accesses whose size differs from an earlier one
	// SampleRate is the SHARDS sampling rate the trace was read with (1 = all).
	SampleRate float64 `json:"sample_rate"`
}

// BadSummary renders the first bad lines for a human, "" if there are none.
func (ri *ReadInfo) BadSummary() string {
	if ri.Bad == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d bad line(s) of %d", ri.Bad, ri.Lines)
	for i, bl := range ri.BadLines {
		if i == 5 {
			fmt.Fprintf(&sb, "; ...")
			break
		}
		fmt.Fprintf(&sb, "; line %d: %s", bl.Line, bl.Reason)
	}
	return sb.String()
}

func (o *Options) ensureDefaults() {
	if o.Format == "" {
		o.Format = FormatAuto
	}
	if o.MaxBadFraction == 0 {
		o.MaxBadFraction = defaultMaxBadFraction
	}
	if o.MaxBadReported == 0 {
		o.MaxBadReported = defaultMaxBadReported
	}
	c := &o.CSV
	c.Time = cmpOr(c.Time, "time")
	c.Path = cmpOr(c.Path, "path")
	c.Size = cmpOr(c.Size, "size")
	c.BytesRead = cmpOr(c.BytesRead, "bytes_read")
	c.Origin = cmpOr(c.Origin, "origin")
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ReadFile reads the trace in the named file (gzip-compressed or not).
func ReadFile(path string, opt Options) (*Trace, error) {
	trs, err := readFile(path, opt, nil, nil)
	if err != nil {
		return nil, err
	}
	return trs[0], nil
}

// ReadFileSampled returns one stratified SHARDS sample of the named file per
// seed (see Sampler), at rate. It reads the file twice: first to find the
// heaviest files with bounded memory (up to heavyShare of the accesses; 0
// disables the heavy stratum), then to keep the sampled files' accesses. Only
// sampled files are interned, so memory shrinks with rate.
func ReadFileSampled(path string, opt Options, rate float64, seeds []uint64, heavyShare float64) ([]*Trace, error) {
	samplers := make([]Sampler, len(seeds))
	for i, s := range seeds {
		sp, err := NewSampler(rate, s)
		if err != nil {
			return nil, err
		}
		samplers[i] = sp
	}
	if heavyShare > 0 {
		ss := newSpaceSaving(1 << 16) // counts off by at most accesses/65536
		count := opt
		count.Progress = nil
		if _, err := readFile(path, count, nil, ss); err != nil {
			return nil, err
		}
		for i := range samplers {
			heavy := pickHeavy(slices.Clone(ss.heap), ss.total, heavyShare, samplers[i].Scale())
			samplers[i] = samplers[i].WithHeavy(heavy)
		}
	}
	return readFile(path, opt, samplers, nil)
}

func readFile(path string, opt Options, samplers []Sampler, counter *spaceSaving) ([]*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	defer f.Close()
	trs, err := read(f, opt, samplers, counter)
	if err != nil {
		return nil, fmt.Errorf("read trace %s: %w", path, err)
	}
	return trs, nil
}

// Read reads a trace from r (gzip-compressed or not).
func Read(r io.Reader, opt Options) (*Trace, error) {
	trs, err := read(r, opt, nil, nil)
	if err != nil {
		return nil, err
	}
	return trs[0], nil
}

// countingReader counts bytes for the progress callback.
type countingReader struct {
	r        io.Reader
	n        int64
	progress func(int64)
	next     int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.progress != nil && c.n >= c.next {
		c.progress(c.n)
		c.next = c.n + 1<<20
	}
	return n, err
}

// lineParser parses one non-blank line into an access. It returns skip for
// lines that are valid but carry no access (other g-stream events).
type lineParser interface {
	parse(line []byte) (key []byte, t, size, bytes int64, skip bool, err error)
}

// read parses r. With samplers it builds one weighted sample per sampler;
// with counter it only counts the files' key hashes; else it builds the trace.
func read(r io.Reader, opt Options, samplers []Sampler, counter *spaceSaving) ([]*Trace, error) {
	opt.ensureDefaults()
	cr := &countingReader{r: r, progress: opt.Progress}
	br := bufio.NewReaderSize(cr, 256<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 256<<10)
	}
	format := opt.Format
	if format == FormatAuto {
		format = detect(br)
	}
	info := ReadInfo{Format: format, SampleRate: 1}
	if len(samplers) > 0 {
		info.SampleRate = samplers[0].Rate()
	}
	if counter != nil {
		samplers = nil
	}
	var p lineParser
	switch format {
	case FormatHepcache:
		p = &hepcacheParser{byOpen: opt.OrderByOpen}
	case FormatGStream:
		p = &gstreamParser{byOpen: opt.OrderByOpen}
	case FormatCSV:
		p = &csvParser{cols: opt.CSV}
	default:
		return nil, fmt.Errorf("unknown trace format %q (want auto, hepcache, csv or gstream)", format)
	}

	nb := max(1, len(samplers))
	builders := make([]*Builder, nb)
	for i := range builders {
		builders[i] = NewBuilder()
	}
	bad := func(line int, err error) {
		info.Bad++
		if len(info.BadLines) < opt.MaxBadReported {
			info.BadLines = append(info.BadLines, BadLine{Line: line, Reason: err.Error()})
		}
	}
	var long []byte
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(long) <= maxLineBytes {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			for errors.Is(err, bufio.ErrBufferFull) { // drain the rest of a huge line
				_, err = br.ReadSlice('\n')
			}
			line = long
		}
		if len(line) > 0 {
			info.Lines++
			if len(line) > maxLineBytes {
				bad(lineNo, fmt.Errorf("line longer than %d bytes", maxLineBytes))
				line = nil
			}
		}
		// A NUL separates records too: g-stream packets end in one, and a
		// collector may store packets back to back.
		for whole := true; len(line) > 0; whole = false {
			seg := line
			if i := bytes.IndexByte(line, 0); i >= 0 {
				seg, line = line[:i], line[i+1:]
			} else {
				line = nil
			}
			trimmed := bytes.TrimSpace(seg)
			switch {
			case len(trimmed) == 0:
				if whole && len(line) == 0 { // a blank line, not the gap after a NUL
					info.Skipped++
				}
			case trimmed[0] == '#':
				info.Skipped++
			default:
				key, t, size, nbytes, skip, perr := p.parse(trimmed)
				switch {
				case errors.Is(perr, errBadHeader):
					return nil, fmt.Errorf("line %d: %w", lineNo, perr)
				case perr != nil:
					bad(lineNo, perr)
				case skip:
					info.Skipped++
				default:
					info.Accesses++
					switch {
					case counter != nil:
						counter.add(KeyHash(key))
					case len(samplers) == 0:
						if builders[0].Add(key, t, size, nbytes) {
							info.SizeConflicts++
						}
					default:
						h := KeyHash(key)
						for i, s := range samplers {
							if w := s.Weight(h); w > 0 && builders[i].AddWeighted(key, t, size, nbytes, w) {
								info.SizeConflicts++
							}
						}
					}
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
	}
	if opt.Progress != nil {
		opt.Progress(cr.n)
	}
	total := info.Accesses + info.Bad
	if info.Bad > 0 && (opt.MaxBadFraction < 0 || float64(info.Bad) > opt.MaxBadFraction*float64(total)) {
		limit := max(opt.MaxBadFraction, 0)
		return nil, fmt.Errorf("%w: %s (more than %.3g %% of %d records; raise the limit with --max-bad)",
			ErrTooManyBad, info.BadSummary(), 100*limit, total)
	}
	out := make([]*Trace, nb)
	for i, b := range builders {
		out[i] = b.Finish()
		out[i].Info = info
		if len(samplers) > 0 {
			out[i].Scale = samplers[i].Scale()
			if out[i].Weight == nil {
				out[i].Weight = []int32{}
			}
		}
	}
	return out, nil
}

// detect guesses the format from the first non-blank, non-comment line.
func detect(br *bufio.Reader) Format {
	peek, _ := br.Peek(64 << 10)
	for len(peek) > 0 {
		line := peek
		if i := bytes.IndexByte(peek, '\n'); i >= 0 {
			line, peek = peek[:i], peek[i+1:]
		} else {
			peek = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if line[0] != '{' {
			return FormatCSV
		}
		if bytes.Contains(line, []byte(`"lfn"`)) || bytes.Contains(line, []byte(`"event"`)) || bytes.Contains(line, []byte(`"code"`)) {
			return FormatGStream
		}
		return FormatHepcache
	}
	return FormatHepcache
}
