package realclient

import (
	"strings"
	"testing"
)

func TestEnvDropsClientSettings(t *testing.T) {
	t.Setenv("XRD_PLUGIN", "/tmp/x.so")
	t.Setenv("XROOT_PROXY", "root://x//")
	env := Env("XRD_CPUSEPGWRTRD=0")
	joined := strings.Join(env, "\n")
	if strings.Contains(joined, "XRD_PLUGIN=") || strings.Contains(joined, "XROOT_PROXY=") {
		t.Fatalf("Env kept the caller's client settings:\n%s", joined)
	}
	if !strings.Contains(joined, "XRD_CPUSEPGWRTRD=0") {
		t.Fatalf("Env lost the extra setting")
	}
}
