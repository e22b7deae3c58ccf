package ttbar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hepcache/hepcache/internal/xrootd/client"
)

// input is the file a job reads, local or remote, as groot's riofs.Reader
// (io.Reader, io.ReaderAt, io.Closer), counting what it reads.
type input struct {
	r     io.ReaderAt
	close func() error
	size  int64

	// off is the position of sequential Reads (riofs reads the header
	// that way).
	off atomic.Int64

	bytes, reads atomic.Int64

	// mu protects recent.
	mu     sync.Mutex
	recent [recentReads]span
	next   int
}

// recentReads is how many past reads input remembers. groot reads every
// basket twice (once to decode its key header, once to load it); ROOT reads
// it once. Serving the repeat from memory keeps the access pattern, the
// bytes read and the round trips those of ROOT.
const recentReads = 64

type span struct {
	off  int64
	data []byte
}

func (in *input) ReadAt(p []byte, off int64) (int, error) {
	in.mu.Lock()
	for _, s := range in.recent {
		if s.data != nil && off >= s.off && off+int64(len(p)) <= s.off+int64(len(s.data)) {
			copy(p, s.data[off-s.off:])
			in.mu.Unlock()
			return len(p), nil
		}
	}
	in.mu.Unlock()
	n, err := in.r.ReadAt(p, off)
	if n > 0 {
		c := append([]byte(nil), p[:n]...)
		in.mu.Lock()
		in.recent[in.next] = span{off, c}
		in.next = (in.next + 1) % recentReads
		in.mu.Unlock()
	}
	return n, err
}

// counted counts the reads that reach the underlying file (below any
// read-ahead).
type counted struct {
	r  io.ReaderAt
	in *input
}

func (c counted) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.in.bytes.Add(int64(n))
	c.in.reads.Add(1)
	return n, err
}

func (in *input) Read(p []byte) (int, error) {
	off := in.off.Load()
	if off >= in.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), in.size-off)]
	n, err := in.ReadAt(p, off)
	in.off.Add(int64(n))
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (in *input) Close() error { return in.close() }

// openInput opens a local path or a root:// URL. readAhead > 0 puts a
// block read-ahead in front of a remote file.
func openInput(ctx context.Context, name string, readAhead int) (*input, error) {
	if !IsRemote(name) {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("ttbar: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("ttbar: %w", err)
		}
		in := &input{close: f.Close, size: st.Size()}
		in.r = counted{f, in}
		return in, nil
	}
	addr, path, err := SplitURL(name)
	if err != nil {
		return nil, err
	}
	// One connection, as XrdCl gives a ROOT job: each further pooled
	// connection would cost the job a dial, a login and an open, three
	// round trips on a WAN link, before its first read.
	c, err := client.New(&client.Config{ConnsPerHost: 1})
	if err != nil {
		return nil, fmt.Errorf("ttbar: %w", err)
	}
	f, err := c.Open(ctx, addr, path)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ttbar: %w", err)
	}
	in := &input{size: f.Info().Size, close: func() error {
		err := f.Close(context.WithoutCancel(ctx))
		c.Close()
		return err
	}}
	in.r = counted{&remoteFile{ctx: ctx, f: f}, in}
	if readAhead > 0 {
		in.r = newBlockReader(in.r, in.size, readAhead)
	}
	return in, nil
}

// SplitURL splits root://host[:port]//path into "host:port" (port 1094 when
// absent) and "/path", without the opaque part's escaping touched.
func SplitURL(raw string) (addr, path string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("ttbar: bad URL %q: %w", raw, err)
	}
	if u.Host == "" {
		return "", "", fmt.Errorf("ttbar: URL %q has no host", raw)
	}
	addr = u.Host
	if u.Port() == "" {
		addr += ":1094"
	}
	path = "/" + strings.TrimLeft(u.Path, "/")
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	return addr, path, nil
}

// remoteFile is an io.ReaderAt over the project's root:// client.
type remoteFile struct {
	ctx context.Context
	f   *client.File
}

func (r *remoteFile) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(r.ctx, p, off) }

// blockReader serves reads from aligned blocks fetched whole, keeping the
// last few, and fetches the block after a missed one in the background: a
// client-side read-ahead in the spirit of XrdCl's and ROOT's.
type blockReader struct {
	r     io.ReaderAt
	size  int64
	block int64

	// mu protects blocks and lru.
	mu     sync.Mutex
	blocks map[int64]*block
	lru    []int64
}

type block struct {
	done chan struct{}
	data []byte
	err  error
}

const blockReaderKeep = 8

func newBlockReader(r io.ReaderAt, size int64, blockSize int) *blockReader {
	return &blockReader{r: r, size: size, block: int64(blockSize), blocks: map[int64]*block{}}
}

// get returns block i, starting its fetch (and the next block's) if needed.
func (b *blockReader) get(i int64) *block {
	b.mu.Lock()
	blk, ok := b.blocks[i]
	var start []int64
	if !ok {
		start = append(start, i)
	}
	if next := i + 1; next*b.block < b.size {
		if _, ok := b.blocks[next]; !ok {
			start = append(start, next)
		}
	}
	for _, j := range start {
		nb := &block{done: make(chan struct{})}
		b.blocks[j] = nb
		b.lru = append(b.lru, j)
		go b.fetch(j, nb)
		if j == i {
			blk = nb
		}
	}
	for len(b.lru) > blockReaderKeep {
		delete(b.blocks, b.lru[0])
		b.lru = b.lru[1:]
	}
	b.mu.Unlock()
	return blk
}

func (b *blockReader) fetch(i int64, blk *block) {
	defer close(blk.done)
	off := i * b.block
	blk.data = make([]byte, min(b.block, b.size-off))
	n, err := b.r.ReadAt(blk.data, off)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(blk.data)) {
		blk.err = err
	}
}

func (b *blockReader) ReadAt(p []byte, off int64) (int, error) {
	total := 0
	for len(p) > 0 {
		if off >= b.size {
			return total, io.EOF
		}
		blk := b.get(off / b.block)
		<-blk.done
		if blk.err != nil {
			return total, blk.err
		}
		n := copy(p, blk.data[off%b.block:])
		total += n
		p, off = p[n:], off+int64(n)
	}
	return total, nil
}
