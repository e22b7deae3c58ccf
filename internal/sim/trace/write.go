package trace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"
)

// WriteCSV writes tr as CSV with the header time,path,size,bytes_read; times
// are RFC 3339 UTC with as many fractional digits as needed.
func WriteCSV(w io.Writer, tr *Trace) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.WriteString("time,path,size,bytes_read\n"); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	var buf []byte
	for i, f := range tr.File {
		buf = buf[:0]
		buf = time.Unix(0, tr.Time[i]).UTC().AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, ',')
		buf = appendCSVField(buf, tr.Name[f])
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, tr.Size[f], 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, tr.Bytes[i], 10)
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("write csv line %d: %w", i+2, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

func appendCSVField(b []byte, s string) []byte {
	quote := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ',' || c == '"' || c == '\n' || c == '\r' {
			quote = true
			break
		}
	}
	if !quote {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
