package sdnotify

import (
	"net"
	"path/filepath"
	"regexp"
	"testing"
)

// TestNotify: states arrive on the socket systemd names, as datagrams.
func TestNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	if ok, err := Notify(Ready); !ok || err != nil {
		t.Fatalf("Notify: %v %v", ok, err)
	}
	buf := make([]byte, 64)
	n, _, err := l.ReadFromUnix(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("got %q %v", buf[:n], err)
	}
	Notify(Reloading())
	n, _, err = l.ReadFromUnix(buf)
	if err != nil || !regexp.MustCompile(`^RELOADING=1\nMONOTONIC_USEC=[1-9][0-9]*$`).Match(buf[:n]) {
		t.Fatalf("reloading: got %q %v", buf[:n], err)
	}
	t.Setenv("NOTIFY_SOCKET", "")
	if ok, err := Notify(Stopping); ok || err != nil {
		t.Fatalf("without a socket: %v %v", ok, err)
	}
}
