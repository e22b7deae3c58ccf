package sidecar

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
	"time"
)

func sample() *Info {
	now := time.Date(2026, 11, 21, 12, 0, 0, 123, time.UTC)
	in := New("root://o:1094", "/store/a.root", 10<<20+5, 1<<20, now.Add(-time.Hour), "etag1", now)
	in.Durable.Set(0)
	in.Durable.Set(10)
	in.AccessCount = 3
	in.ChecksumState = ChecksumVerified
	in.Adler32 = 0xdeadbeef
	in.CRC32C = 0x01020304
	in.Digests = map[string]string{"md5": "0123456789abcdef0123456789abcdef", "crc32": "89abcdef"}
	for i := 0; i < MaxRecords+5; i++ {
		in.AddRecord(Access{Open: now.Add(time.Duration(i) * time.Second), Close: now.Add(time.Duration(i+1) * time.Second), BytesHit: int64(i), BytesMissed: 7, Bypass: 1})
	}
	return in
}

func TestRoundTrip(t *testing.T) {
	in := sample()
	out, err := Unmarshal(in.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Records) != MaxRecords || out.Records[0].BytesHit != 5 {
		t.Fatalf("records not trimmed to the newest: %d, first hit %d", len(out.Records), out.Records[0].BytesHit)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip differs:\n%+v\n%+v", in, out)
	}
	if out.Complete() {
		t.Fatal("2 of 11 blocks reported complete")
	}
	// A block forgotten (found bad) takes the digests of the whole with it.
	out.ForgetBlock(10)
	if out.Digests != nil {
		t.Fatalf("digests %v kept after a block was forgotten", out.Digests)
	}
}

func TestCorruptionDetected(t *testing.T) {
	good := sample().Marshal()
	cases := map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)/2],
		"bitflip":   flip(good, 40),
		"lastbyte":  flip(good, len(good)-1),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Unmarshal(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x10
	return c
}

func FuzzUnmarshal(f *testing.F) {
	f.Add(sample().Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := Unmarshal(b)
		if err != nil {
			return
		}
		if _, err := Unmarshal(in.Marshal()); err != nil {
			t.Fatalf("re-encoding of a valid sidecar fails: %v", err)
		}
	})
}

// TestVersion1StillLoads: a sidecar written before per-block CRCs loads,
// with no CRC known; one written before flags loads with none set; a
// round trip keeps both.
func TestVersion1StillLoads(t *testing.T) {
	in := New("root://o", "/f", 5<<20+1, 1<<20, time.Unix(5, 0), "", time.Unix(6, 0))
	in.Durable.Set(0)
	in.Durable.Set(5)
	in.SetBlockCRC(5, 0xdeadbeef)
	in.Flags = FlagUnconfirmed
	b := in.Marshal()
	out, err := Unmarshal(b)
	if err != nil || !out.CRCKnown.Test(5) || out.CRCKnown.Test(0) || out.BlockCRC[5] != 0xdeadbeef || !out.Unconfirmed() {
		t.Fatalf("v4 round trip: %v %+v", err, out)
	}
	b = b[:len(b)-4-1] // version 3: no digests
	binary.LittleEndian.PutUint32(b[len(magic):], 3)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if out, err := Unmarshal(b); err != nil || !out.Unconfirmed() || out.Digests != nil {
		t.Fatalf("v3: %v %+v", err, out)
	}
	// Version 2: no flags.
	v2 := append([]byte(nil), b[:len(b)-4-1]...)
	binary.LittleEndian.PutUint32(v2[len(magic):], 2)
	v2 = binary.LittleEndian.AppendUint32(v2, crc32.Checksum(v2, castagnoli))
	if out, err := Unmarshal(v2); err != nil || out.Flags != 0 || out.BlockCRC[5] != 0xdeadbeef {
		t.Fatalf("v2: %v %+v", err, out)
	}
	// Version 1: no CRC section.
	nb := 6
	v1 := append([]byte(nil), b[:len(b)-4-1-(nb+7)/8-4*nb]...)
	binary.LittleEndian.PutUint32(v1[len(magic):], 1)
	v1 = binary.LittleEndian.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	old, err := Unmarshal(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !old.Durable.Test(5) || old.CRCKnown.Count() != 0 || len(old.BlockCRC) != nb {
		t.Fatalf("v1: %+v", old)
	}
}
