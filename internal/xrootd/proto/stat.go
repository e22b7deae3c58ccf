package proto

import (
	"bytes"
	"fmt"
	"strconv"
)

// StatInfo is the text stat answer of kXR_stat, kXR_open with kXR_retstat
// and kXR_dirlist with kXR_dstat: "id size flags mtime", and in the
// extended form (XRootD >= 5) " ctime atime mode owner group".
type StatInfo struct {
	// ID identifies the file on the server (dev<<32 | inode for the C++
	// server); 0 marks an offline file there.
	ID    int64
	Size  int64
	Flags StatFlags
	// MTime is the modification time in Unix seconds.
	MTime int64

	// Extended is set when the fields below are present.
	Extended bool
	CTime    int64
	ATime    int64
	// Mode holds the permission bits (07777).
	Mode  uint32
	Owner string
	Group string
}

// IsDir reports whether the stat is of a directory.
func (s *StatInfo) IsDir() bool { return s.Flags&StatIsDir != 0 }

// AppendStatInfo appends the stat text (without a NUL) as the C++ server
// formats it: "%lld %lld %d %ld", then " %ld %ld %04o %s %s" if Extended.
func AppendStatInfo(dst []byte, s *StatInfo) []byte {
	dst = strconv.AppendInt(dst, s.ID, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, s.Size, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(s.Flags), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, s.MTime, 10)
	if !s.Extended {
		return dst
	}
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, s.CTime, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, s.ATime, 10)
	dst = append(dst, ' ')
	m := s.Mode & 07777
	for d := uint32(010000); d > 8 && m < d/8; d /= 8 {
		dst = append(dst, '0') // %04o
	}
	dst = strconv.AppendUint(dst, uint64(m), 8)
	dst = append(dst, ' ')
	dst = append(dst, nonEmpty(s.Owner)...)
	dst = append(dst, ' ')
	return append(dst, nonEmpty(s.Group)...)
}

func nonEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ParseStatInfo parses a stat text (a trailing NUL is allowed). It accepts
// the 4-field and the extended form and ignores a trailing checksum
// ("[ adler32:... ]").
func ParseStatInfo(b []byte) (StatInfo, error) {
	var s StatInfo
	b = bytes.TrimRight(b, "\x00")
	var f [9][]byte
	n := 0
	for rest := b; len(rest) > 0 && n < len(f); {
		rest = bytes.TrimLeft(rest, " ")
		if len(rest) == 0 {
			break
		}
		i := bytes.IndexByte(rest, ' ')
		if i < 0 {
			i = len(rest)
		}
		f[n] = rest[:i]
		n++
		rest = rest[i:]
	}
	if n < 4 {
		return s, fmt.Errorf("stat %q: %d fields, want at least 4: %w", b, n, ErrMalformed)
	}
	var err error
	num := func(field []byte) int64 {
		v, e := strconv.ParseInt(string(field), 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("stat %q: field %q: %w", b, field, ErrMalformed)
		}
		return v
	}
	s.ID = num(f[0])
	s.Size = num(f[1])
	s.Flags = StatFlags(num(f[2]))
	s.MTime = num(f[3])
	if n >= 9 && f[4][0] != '[' {
		s.CTime = num(f[4])
		s.ATime = num(f[5])
		m, e := strconv.ParseUint(string(f[6]), 8, 32)
		if e != nil && err == nil {
			err = fmt.Errorf("stat %q: mode %q: %w", b, f[6], ErrMalformed)
		}
		s.Mode = uint32(m)
		s.Owner, s.Group = string(f[7]), string(f[8])
		s.Extended = true
	}
	return s, err
}

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string
	// Stat is valid when HasStat is set (kXR_dstat listings).
	Stat    StatInfo
	HasStat bool
}

// AppendDirlistBody appends directory entries in the dirlist body format to
// dst: "name\n" per entry, or "name\nstat\n" when withStat. A dstat
// listing starts with DStatLeadIn in its first response; pass leadIn for
// that one. The last response of a listing is sent with FinishDirlist.
func AppendDirlistBody(dst []byte, leadIn, withStat bool, entries []DirEntry) []byte {
	if leadIn {
		dst = append(dst, DStatLeadIn...)
	}
	for i := range entries {
		dst = append(dst, entries[i].Name...)
		dst = append(dst, '\n')
		if withStat {
			dst = AppendStatInfo(dst, &entries[i].Stat)
			dst = append(dst, '\n')
		}
	}
	return dst
}

// AppendDirlist appends one dirlist response: kXR_oksofar with the entries
// when more responses follow (final false), else kXR_ok whose body's last
// '\n' becomes a NUL (an empty final body stays empty), as the C++ server
// does. leadIn adds DStatLeadIn (first response of a dstat listing only).
func AppendDirlist(dst []byte, sid StreamID, final, leadIn, withStat bool, entries []DirEntry) []byte {
	status := StatusOKSoFar
	if final {
		status = StatusOK
	}
	hdr := len(dst)
	dst = AppendResponseHeader(dst, sid, status, 0)
	dst = AppendDirlistBody(dst, leadIn, withStat, entries)
	if final && len(dst) > hdr+ResponseHeaderLen {
		dst[len(dst)-1] = 0
	}
	be.PutUint32(dst[hdr+4:], uint32(len(dst)-hdr-ResponseHeaderLen))
	return dst
}

// ParseDirlist parses the concatenated bodies of all responses to one
// kXR_dirlist and appends the entries to dst. A body starting with
// DStatLeadIn is parsed as name/stat line pairs; the "." lead-in entry is
// dropped.
func ParseDirlist(dst []DirEntry, body []byte) ([]DirEntry, error) {
	body = bytes.TrimRight(body, "\x00")
	withStat := bytes.HasPrefix(body, []byte(DStatLeadIn)) || bytes.Equal(body, []byte(DStatLeadIn[:len(DStatLeadIn)-1]))
	if withStat {
		body = body[min(len(DStatLeadIn), len(body)):]
	}
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\n')
		var line []byte
		if i < 0 {
			line, body = body, nil
		} else {
			line, body = body[:i], body[i+1:]
		}
		if len(line) == 0 {
			continue
		}
		e := DirEntry{Name: string(line)}
		if withStat {
			j := bytes.IndexByte(body, '\n')
			var st []byte
			if j < 0 {
				st, body = body, nil
			} else {
				st, body = body[:j], body[j+1:]
			}
			var err error
			if e.Stat, err = ParseStatInfo(st); err != nil {
				return dst, fmt.Errorf("dirlist entry %q: %w", line, err)
			}
			e.HasStat = true
		}
		dst = append(dst, e)
	}
	return dst, nil
}
