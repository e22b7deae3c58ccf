package s3origin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestKeyFilesFollowRotation(t *testing.T) {
	dir := t.TempDir()
	ak, sk := filepath.Join(dir, "access"), filepath.Join(dir, "secret")
	os.WriteFile(ak, []byte("AK1\n"), 0o600)
	os.WriteFile(sk, []byte("  SK1\n"), 0o600)
	c, err := KeyFiles(ak, sk)
	if err != nil {
		t.Fatal(err)
	}
	fc := c.(*fileCredentials)
	now := time.Now()
	fc.now = func() time.Time { return now }
	if got, _ := c.Get(); got.AccessKeyID != "AK1" || got.SecretAccessKey != "SK1" {
		t.Fatalf("got %v", got)
	}
	// Rotated the way secret mounts do it: new files renamed in place.
	for name, v := range map[string]string{ak: "AK2", sk: "SK2"} {
		os.WriteFile(name+".new", []byte(v), 0o600)
		os.Rename(name+".new", name)
	}
	if got, _ := c.Get(); got.AccessKeyID != "AK1" {
		t.Fatalf("re-read before the recheck interval: %v", got)
	}
	now = now.Add(recheckInterval)
	if got, _ := c.Get(); got.AccessKeyID != "AK2" || got.SecretAccessKey != "SK2" {
		t.Fatalf("after rotation: %v", got)
	}
	// A half-written rotation keeps the previous pair.
	os.WriteFile(sk, nil, 0o600)
	now = now.Add(recheckInterval)
	if got, err := c.Get(); err != nil || got.SecretAccessKey != "SK2" {
		t.Fatalf("after an empty secret file: %v %v", got, err)
	}
	// SIGHUP: Reload reads at once.
	os.WriteFile(sk, []byte("SK3"), 0o600)
	if err := c.(Reloader).Reload(); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(); got.SecretAccessKey != "SK3" {
		t.Fatalf("after Reload: %v", got)
	}
}

func TestResolveCredentials(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "credentials")
	os.WriteFile(shared, []byte("[default]\naws_access_key_id = DEF\naws_secret_access_key = defsecret\n\n# c\n[profile other]\naws_access_key_id=OTH\naws_secret_access_key=othsecret\naws_session_token = tok\n"), 0o600)
	ak, sk := filepath.Join(dir, "ak"), filepath.Join(dir, "sk")
	os.WriteFile(ak, []byte("FILE"), 0o600)
	os.WriteFile(sk, []byte("filesecret"), 0o600)
	for _, tc := range []struct {
		name string
		cc   CredentialsConfig
		env  map[string]string
		id   string
		err  bool
	}{
		{"anonymous", CredentialsConfig{Anonymous: true}, map[string]string{"AWS_ACCESS_KEY_ID": "ENV", "AWS_SECRET_ACCESS_KEY": "x"}, "", false},
		{"key files first", CredentialsConfig{AccessKeyFile: ak, SecretKeyFile: sk}, map[string]string{"AWS_ACCESS_KEY_ID": "ENV", "AWS_SECRET_ACCESS_KEY": "x"}, "FILE", false},
		{"environment", CredentialsConfig{}, map[string]string{"AWS_ACCESS_KEY_ID": "ENV", "AWS_SECRET_ACCESS_KEY": "x", "AWS_SHARED_CREDENTIALS_FILE": shared}, "ENV", false},
		{"shared default", CredentialsConfig{}, map[string]string{"AWS_SHARED_CREDENTIALS_FILE": shared}, "DEF", false},
		{"shared profile from env", CredentialsConfig{}, map[string]string{"AWS_SHARED_CREDENTIALS_FILE": shared, "AWS_PROFILE": "other"}, "OTH", false},
		{"shared in home", CredentialsConfig{Profile: "other"}, map[string]string{"HOME": homeWith(t, shared)}, "OTH", false},
		{"no such profile", CredentialsConfig{Profile: "nope"}, map[string]string{"AWS_SHARED_CREDENTIALS_FILE": shared}, "", true},
		{"nothing", CredentialsConfig{}, map[string]string{"HOME": t.TempDir()}, "", true},
		{"one key file", CredentialsConfig{AccessKeyFile: ak}, nil, "", true},
		{"id without secret", CredentialsConfig{}, map[string]string{"AWS_ACCESS_KEY_ID": "ENV"}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ResolveCredentials(tc.cc, func(k string) string { return tc.env[k] })
			if tc.err {
				if err == nil {
					t.Fatal("no error")
				}
				for _, s := range []string{"defsecret", "othsecret", "filesecret"} {
					if strings.Contains(err.Error(), s) {
						t.Fatalf("error shows a secret: %v", err)
					}
				}
				if tc.name == "nothing" && !errors.Is(err, ErrNoCredentials) {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Get()
			if err != nil || got.AccessKeyID != tc.id {
				t.Fatalf("got %v %v, want %s", got, err, tc.id)
			}
		})
	}
}

// homeWith returns a home directory whose ~/.aws/credentials is a copy of
// file.
func homeWith(t *testing.T, file string) string {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".aws"), 0o700)
	b, _ := os.ReadFile(file)
	os.WriteFile(filepath.Join(home, ".aws", "credentials"), b, 0o600)
	return home
}
