// Package sdnotify tells systemd about the service's state (sd_notify(3)),
// without cgo: a datagram to the socket named by $NOTIFY_SOCKET. A unit with
// Type=notify then counts the service as started only once it listens, and
// sees reloads and the stop. Without $NOTIFY_SOCKET (not under systemd)
// every call does nothing.
package sdnotify

import (
	"net"
	"os"
)

// States sent by the server.
const (
	Ready     = "READY=1"
	Reloading = "RELOADING=1"
	Stopping  = "STOPPING=1"
)

// Notify sends state (one or more "KEY=value" lines). It reports whether a
// socket was there to send to.
func Notify(state string) (bool, error) {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return false, nil
	}
	if name[0] == '@' { // abstract namespace
		name = "\x00" + name[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return false, err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err == nil, err
}
