package sigv4

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The examples of the S3 documentation ("Signature Calculations for the
// Authorization Header"), with their published signatures.
func TestSignDocumentedExamples(t *testing.T) {
	creds := Credentials{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
	when := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, url, hdr, signed, sig string
	}{
		{"get object", "https://examplebucket.s3.amazonaws.com/test.txt", "Range: bytes=0-9",
			"host;range;x-amz-content-sha256;x-amz-date", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"},
		{"get bucket lifecycle", "https://examplebucket.s3.amazonaws.com/?lifecycle", "",
			"host;x-amz-content-sha256;x-amz-date", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"},
		{"list objects", "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J", "",
			"host;x-amz-content-sha256;x-amz-date", "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", tc.url, nil)
			if k, v, ok := strings.Cut(tc.hdr, ": "); ok {
				req.Header.Set(k, v)
			}
			if err := Sign(req, creds, "us-east-1", "s3", EmptySHA256, when); err != nil {
				t.Fatal(err)
			}
			want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=" +
				tc.signed + ", Signature=" + tc.sig
			if got := req.Header.Get("Authorization"); got != want {
				t.Fatalf("Authorization:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"/a b/c$d.txt": "/a%20b/c%24d.txt",
		"ü~-_.":        "%C3%BC~-_.",
		"a/b+c=d&e":    "a/b%2Bc%3Dd%26e",
	} {
		if got := Escape(in, false); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Escape("a/b", true); got != "a%2Fb" {
		t.Errorf("Escape with slash = %q", got)
	}
}

// TestCredentialsNeverPrintTheSecret: neither the secret nor the session
// token is printed, and of the access key id only its last four
// characters (issue 36 item 10: the whole id was in the server log).
func TestCredentialsNeverPrintTheSecret(t *testing.T) {
	for _, tc := range []struct {
		id, want string
	}{
		{"AKIAIOSFODNN7EXAMPLE", "access key ending in MPLE"},
		{"AK", "access key (short id, not shown)"},
		{"", "anonymous"},
	} {
		c := Credentials{AccessKeyID: tc.id, SecretAccessKey: "s3cr3t", SessionToken: "t0k"}
		for _, s := range []string{c.String(), c.GoString(), fmt.Sprintf("%v %+v %#v", c, c, c)} {
			if strings.Contains(s, "s3cr3t") || strings.Contains(s, "t0k") || tc.id != "" && strings.Contains(s, tc.id) {
				t.Fatalf("%q shows a secret or the whole key id", s)
			}
		}
		if got := c.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}
