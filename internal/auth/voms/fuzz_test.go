package voms

import "testing"

// FuzzParseAC: arbitrary bytes in a proxy's VOMS extension never panic
// the parser. The corpus (testdata/fuzz) holds a real extension and AC made
// by authtest; no keys are made here, so the fuzzer runs fast.
func FuzzParseAC(f *testing.F) {
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		if acs, err := ExtractACs(b); err == nil {
			for _, a := range acs {
				ParseAC(a)
			}
		}
		ParseAC(b)
	})
}
