// Package sdnotify tells systemd about a service's state (sd_notify(3)):
// a datagram such as "READY=1" to the unix socket named in
// $NOTIFY_SOCKET, which systemd sets for Type=notify units. Outside
// systemd the variable is unset and every call does nothing.
package sdnotify

import (
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"time"
)

// The states a unit's Type=notify protocol uses (sd_notify(3)).
const (
	Ready     = "READY=1"
	Reloading = "RELOADING=1"
	Stopping  = "STOPPING=1"
	// Watchdog tells systemd the service is alive (WatchdogSec=): sent
	// at least once every WatchdogInterval.
	Watchdog = "WATCHDOG=1"
)

// WatchdogInterval is the time within which systemd expects each
// WATCHDOG=1 ($WATCHDOG_USEC, set for a unit with WatchdogSec=), or 0
// when the watchdog is off, the value is not a positive number, or it is
// meant for another process ($WATCHDOG_PID names another pid).
func WatchdogInterval() time.Duration {
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0
	}
	us, err := strconv.ParseUint(os.Getenv("WATCHDOG_USEC"), 10, 63)
	if err != nil || us == 0 || us > uint64(math.MaxInt64/int64(time.Microsecond)) {
		return 0
	}
	return time.Duration(us) * time.Microsecond
}

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
