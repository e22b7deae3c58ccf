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
		{"tb", "200TB", 200 << 40, false},
		{"space and case", " 1.5 gib ", 1.5 * (1 << 30), false},
		{"short unit", "5g", 5 << 30, false},
		{"serve's block size", "1M", 1 << 20, false},
		{"bytes", "10b", 10, false},
		{"pb", "0.25PB", 1 << 48, false},
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
		{0, "0 B"}, {999, "999 B"}, {1024, "1.00 KiB"}, {200 << 40, "200 TiB"}, {12345 << 20, "12.1 GiB"}, {1.5 * (1 << 50), "1.50 PiB"},
	}
	for _, tc := range tests {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList("1TB, 2TB,,5TB")
	if err != nil || len(got) != 3 || got[2] != 5<<40 {
		t.Fatalf("ParseList = %v, %v", got, err)
	}
}
