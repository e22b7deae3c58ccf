// Package gridmap reads grid-mapfiles: each line maps a certificate
// subject (OpenSSL's one-line form, quoted when it holds spaces) to a
// local name, as XRootD's XrdOucGMap, XrdHttp's http.gridmap and gsi's
// -gridmap read them.
package gridmap

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxFile bounds a grid-mapfile (a large VO's has some thousands of lines).
const maxFile = 16 << 20

// Map is a parsed grid-mapfile: subject DN to name. Immutable.
type Map map[string]string

// Load reads the grid-mapfile at name.
func Load(name string) (Map, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("gridmap: %w", err)
	}
	defer f.Close()
	m, err := Parse(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("gridmap %s: %w", name, err)
	}
	return m, nil
}

// Parse reads a grid-mapfile. Blank lines and lines starting with # are
// skipped; a name list ("alice,bob") maps to its first name.
func Parse(r io.Reader) (Map, error) {
	m := Map{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	n, total := 0, 0
	for sc.Scan() {
		n++
		total += len(sc.Bytes()) + 1
		if total > maxFile {
			return nil, fmt.Errorf("larger than %d bytes", maxFile)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		var dn, rest string
		if line[0] == '"' {
			end := strings.IndexByte(line[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated quoted subject", n)
			}
			dn, rest = line[1:1+end], line[2+end:]
		} else {
			i := strings.LastIndexAny(line, " \t")
			if i < 0 {
				return nil, fmt.Errorf("line %d: a subject and a name are needed", n)
			}
			dn, rest = line[:i], line[i:]
		}
		name, _, _ := strings.Cut(strings.TrimSpace(rest), ",")
		if dn == "" || name == "" {
			return nil, fmt.Errorf("line %d: a subject and a name are needed", n)
		}
		if _, dup := m[dn]; !dup {
			m[dn] = name
		}
	}
	return m, sc.Err()
}
