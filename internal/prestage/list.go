package prestage

import (
	"bufio"
	"fmt"
	"path"
	"strings"

	"github.com/hepcache/hepcache/internal/backend"
)

// ParseList reads a file list, one file per line: an absolute path
// ("/store/data/f.root") for the default origin, or a URL
// ("root://origin.example:1094//store/f.root") naming the origin in
// forwarding mode. Blank lines and lines starting with '#' are skipped;
// opaque data after '?' is dropped. The line number is in every error.
func ParseList(text string) ([]backend.Request, error) {
	var reqs []backend.Request
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		req, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %q: %w", n, line, err)
		}
		reqs = append(reqs, req)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("file list: %w", err)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("file list names no file")
	}
	return reqs, nil
}

func parseLine(line string) (backend.Request, error) {
	var req backend.Request
	p := line
	if scheme, rest, ok := strings.Cut(line, "://"); ok {
		host, rp, ok := strings.Cut(rest, "/")
		if !ok || host == "" || scheme == "" {
			return req, fmt.Errorf("a URL needs scheme://host/path: %w", backend.ErrInvalidPath)
		}
		req.Origin = scheme + "://" + host
		p = "/" + rp
	}
	p, _, _ = strings.Cut(p, "?")
	if !strings.HasPrefix(p, "/") {
		return req, fmt.Errorf("not an absolute path: %w", backend.ErrInvalidPath)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return req, fmt.Errorf("'..' in a path: %w", backend.ErrInvalidPath)
		}
	}
	req.Path = path.Clean(p)
	if req.Path == "/" {
		return req, fmt.Errorf("a directory is not a file: %w", backend.ErrInvalidPath)
	}
	return req, nil
}
