package bytesize

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		err  bool
	}{
		{"plain", "1234", 1234, false},
		{"tb", "200TB", 200e12, false},
		{"space and case", " 1.5 gib ", 1.5 * (1 << 30), false},
		{"short unit", "5g", 5e9, false},
		{"bytes", "10b", 10, false},
		{"pb", "0.2PB", 2e14, false},
		{"garbage", "lots", 0, true},
		{"negative", "-1GB", 0, true},
		{"empty", "", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("Parse(%q) err = %v, want error %v", tc.in, err, tc.err)
			}
			if got != tc.want {
				t.Fatalf("Parse(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0 B"}, {999, "999 B"}, {1000, "1.00 kB"}, {200e12, "200 TB"}, {12.34e9, "12.3 GB"}, {1.5e15, "1.50 PB"},
	}
	for _, tc := range tests {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList("1TB, 2TB,,5TB")
	if err != nil || len(got) != 3 || got[2] != 5e12 {
		t.Fatalf("ParseList = %v, %v", got, err)
	}
}
