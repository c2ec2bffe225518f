// Package sdnotify tells systemd about a service's state (sd_notify(3)):
// a datagram such as "READY=1" to the unix socket named in
// $NOTIFY_SOCKET, which systemd sets for Type=notify units. Outside
// systemd the variable is unset and every call does nothing.
package sdnotify

import (
	"fmt"
	"net"
	"os"
)

// The states a unit's Type=notify protocol uses (sd_notify(3)).
const (
	Ready     = "READY=1"
	Reloading = "RELOADING=1"
	Stopping  = "STOPPING=1"
)

// Notify sends state (one or more "KEY=value" lines) to the socket in
// $NOTIFY_SOCKET. It returns false and no error when the variable is
// unset: the process was not started by systemd as a notify service. A
// name starting with '@' is an abstract socket (Linux).
func Notify(state string) (bool, error) {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return false, nil
	}
	if name[0] == '@' {
		// Go's net package spells an abstract address with a leading NUL.
		name = "\x00" + name[1:]
	} else if name[0] != '/' {
		return false, fmt.Errorf("sd_notify: NOTIFY_SOCKET %q is neither a path nor an abstract name", name)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sd_notify %s: %w", state, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sd_notify %s: %w", state, err)
	}
	return true, nil
}
