package s3origin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/sigv4"
)

// Credentials gives the key pair each request is signed with. The zero
// sigv4.Credentials means anonymous: requests go unsigned (public
// buckets). Implementations are safe for concurrent use and answer from
// memory (a file is re-read only when it changed).
type Credentials interface {
	Get() (sigv4.Credentials, error)
}

// Reloader is implemented by credentials read from files: Reload re-reads
// them at once (SIGHUP), whether or not they look changed.
type Reloader interface {
	Reload() error
}

// CredentialsFunc adapts a function to Credentials.
type CredentialsFunc func() (sigv4.Credentials, error)

// Get calls f.
func (f CredentialsFunc) Get() (sigv4.Credentials, error) { return f() }

// Anonymous sends requests unsigned, for public buckets.
func Anonymous() Credentials {
	return CredentialsFunc(func() (sigv4.Credentials, error) { return sigv4.Credentials{}, nil })
}

// Static always gives c (e.g. from the AWS_* environment variables).
func Static(c sigv4.Credentials) Credentials {
	return CredentialsFunc(func() (sigv4.Credentials, error) { return c, nil })
}

// recheckInterval bounds how often a credentials file is stat'ed to see
// whether it changed: at most one stat per file per second, whatever the
// request rate.
const recheckInterval = time.Second

// fileCredentials re-reads its files when their size, modification time or
// inode change, and on Reload. A read that fails keeps the credentials
// read before (a key rotation writing the file in two steps is not
// fatal); the error is returned only while there are none.
type fileCredentials struct {
	files []string
	parse func(contents [][]byte) (sigv4.Credentials, error)
	now   func() time.Time

	// mu protects the fields below.
	mu      sync.Mutex
	creds   sigv4.Credentials
	err     error
	stamps  []string
	checked time.Time
}

// KeyFiles reads the access key id and the secret from two files (each
// holding the key alone, surrounding white space ignored), as a Kubernetes
// or Vault secret mount gives them.
func KeyFiles(accessKeyFile, secretKeyFile string) (Credentials, error) {
	fc := &fileCredentials{files: []string{accessKeyFile, secretKeyFile}, now: time.Now,
		parse: func(b [][]byte) (sigv4.Credentials, error) {
			c := sigv4.Credentials{AccessKeyID: string(bytes.TrimSpace(b[0])), SecretAccessKey: string(bytes.TrimSpace(b[1]))}
			if c.AccessKeyID == "" || c.SecretAccessKey == "" {
				return sigv4.Credentials{}, fmt.Errorf("access key file %s or secret key file %s is empty", accessKeyFile, secretKeyFile)
			}
			return c, nil
		}}
	return fc, fc.Reload()
}

// SharedFile reads a profile of an AWS shared credentials file (INI:
// [profile] with aws_access_key_id, aws_secret_access_key and optionally
// aws_session_token).
func SharedFile(path, profile string) (Credentials, error) {
	if profile == "" {
		profile = "default"
	}
	fc := &fileCredentials{files: []string{path}, now: time.Now,
		parse: func(b [][]byte) (sigv4.Credentials, error) { return parseShared(b[0], path, profile) }}
	return fc, fc.Reload()
}

// Get implements Credentials.
func (fc *fileCredentials) Get() (sigv4.Credentials, error) {
	fc.mu.Lock()
	due := fc.now().Sub(fc.checked) >= recheckInterval
	fc.mu.Unlock()
	if due {
		fc.refresh(false)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.creds, fc.err
}

// Reload implements Reloader.
func (fc *fileCredentials) Reload() error { return fc.refresh(true) }

// refresh re-reads the files if force or if they changed. No lock is held
// while reading them.
func (fc *fileCredentials) refresh(force bool) error {
	stamps := make([]string, len(fc.files))
	for i, f := range fc.files {
		if fi, err := os.Stat(f); err == nil {
			stamps[i] = fmt.Sprintf("%d/%d/%v", fi.Size(), fi.ModTime().UnixNano(), inode(fi))
		}
	}
	fc.mu.Lock()
	fc.checked = fc.now()
	same := !force && fc.stamps != nil && equal(stamps, fc.stamps)
	fc.mu.Unlock()
	if same {
		return nil
	}
	contents := make([][]byte, len(fc.files))
	var err error
	for i, f := range fc.files {
		if contents[i], err = os.ReadFile(f); err != nil {
			break
		}
	}
	var c sigv4.Credentials
	if err == nil {
		c, err = fc.parse(contents)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("s3 credentials: %w", err)
		if fc.creds.AccessKeyID == "" {
			fc.err = err
		}
		// The stamps stay: a file that is still being written is read
		// again at the next check.
		return err
	}
	fc.creds, fc.err, fc.stamps = c, nil, stamps
	return nil
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// parseShared reads profile from an AWS shared credentials file. Errors
// name the file and profile, never a value.
func parseShared(b []byte, path, profile string) (sigv4.Credentials, error) {
	var c sigv4.Credentials
	found := false
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.TrimSpace(strings.TrimPrefix(line[1:len(line)-1], "profile "))
			if section == profile {
				found = true
			}
			continue
		}
		if section != profile {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "aws_access_key_id":
			c.AccessKeyID = v
		case "aws_secret_access_key":
			c.SecretAccessKey = v
		case "aws_session_token":
			c.SessionToken = v
		}
	}
	switch {
	case !found:
		return c, fmt.Errorf("%s: no profile [%s]", path, profile)
	case c.AccessKeyID == "" || c.SecretAccessKey == "":
		return c, fmt.Errorf("%s: profile [%s] lacks aws_access_key_id or aws_secret_access_key", path, profile)
	}
	return c, nil
}

// CredentialsConfig says where the cache's S3 credentials come from.
type CredentialsConfig struct {
	// AccessKeyFile and SecretKeyFile hold the key pair, re-read when they
	// change and on Reload. Both or neither.
	AccessKeyFile, SecretKeyFile string
	// Profile is the profile of the shared credentials file. Default
	// $AWS_PROFILE, else "default".
	Profile string
	// Anonymous sends requests unsigned (public buckets).
	Anonymous bool
}

// ErrNoCredentials: none of the places credentials are looked for has any.
var ErrNoCredentials = errors.New("s3: no credentials")

// ResolveCredentials finds the credentials the way the S3 tools do, first
// found wins: anonymous when asked for; the key files; the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); the shared
// credentials file ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials)
// with the profile. getenv is os.Getenv outside tests.
func ResolveCredentials(cc CredentialsConfig, getenv func(string) string) (Credentials, error) {
	if cc.Anonymous {
		if cc.AccessKeyFile != "" || cc.SecretKeyFile != "" {
			return nil, errors.New("s3 credentials: anonymous access and key files are exclusive")
		}
		return Anonymous(), nil
	}
	if cc.AccessKeyFile != "" || cc.SecretKeyFile != "" {
		if cc.AccessKeyFile == "" || cc.SecretKeyFile == "" {
			return nil, errors.New("s3 credentials: give both the access key file and the secret key file")
		}
		return KeyFiles(cc.AccessKeyFile, cc.SecretKeyFile)
	}
	if id := getenv("AWS_ACCESS_KEY_ID"); id != "" {
		secret := getenv("AWS_SECRET_ACCESS_KEY")
		if secret == "" {
			return nil, errors.New("s3 credentials: AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
		}
		return Static(sigv4.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: getenv("AWS_SESSION_TOKEN")}), nil
	}
	shared := getenv("AWS_SHARED_CREDENTIALS_FILE")
	if shared == "" {
		if home := getenv("HOME"); home != "" {
			shared = filepath.Join(home, ".aws", "credentials")
		}
	}
	profile := cc.Profile
	if profile == "" {
		profile = getenv("AWS_PROFILE")
	}
	if shared != "" {
		if _, err := os.Stat(shared); err == nil {
			return SharedFile(shared, profile)
		}
	}
	return nil, fmt.Errorf("%w: no key files configured, AWS_ACCESS_KEY_ID unset, no shared credentials file %q; for a public bucket ask for anonymous access", ErrNoCredentials, shared)
}
