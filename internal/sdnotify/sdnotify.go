// Package sdnotify tells systemd about the service's state (sd_notify(3)),
// without cgo: a datagram to the socket named by $NOTIFY_SOCKET. A unit with
// Type=notify then counts the service as started only once it listens, and
// sees reloads and the stop. Without $NOTIFY_SOCKET (not under systemd)
// every call does nothing.
package sdnotify

import (
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// States sent by the server.
const (
	Ready    = "READY=1"
	Stopping = "STOPPING=1"
)

// Reloading is the state at the start of a reload: sd_notify(3) wants
// RELOADING=1 together with the CLOCK_MONOTONIC time it began, so that
// systemd can tell this reload from an earlier one. READY=1 ends it.
func Reloading() string {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return "RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(ts.Nano()/1000, 10)
}

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
