// The systemd notify protocol (sd_notify(3)), for Type=notify units:
// READY=1 once the listeners accept, RELOADING=1 and READY=1 around a
// reload, STOPPING=1 when the drain begins.

package main

import (
	"log"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// notifier sends state lines to the service manager's socket,
// $NOTIFY_SOCKET; without one (not started by systemd) it does nothing.
// Safe for concurrent use.
type notifier struct {
	mu   sync.Mutex
	conn *net.UnixConn // nil: no socket
}

// newNotifier connects to $NOTIFY_SOCKET: a path, or an abstract socket
// name written with a leading '@' (Go's net package maps '@' to the
// abstract namespace's leading NUL, as sd_notify does). The variable is
// unset, so that nothing the process starts sends in its name.
func newNotifier() *notifier {
	name := os.Getenv("NOTIFY_SOCKET")
	os.Unsetenv("NOTIFY_SOCKET")
	n := &notifier{}
	if name == "" {
		return n
	}
	if name[0] != '/' && name[0] != '@' {
		log.Printf("loopgate: NOTIFY_SOCKET %q: neither a path nor an abstract name; not notifying", name)
		return n
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		log.Printf("loopgate: NOTIFY_SOCKET %s: %v; not notifying", name, err)
		return n
	}
	n.conn = c
	return n
}

// send writes state, newline-separated KEY=VALUE lines, as one datagram.
func (n *notifier) send(state string) {
	if n.conn == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := n.conn.Write([]byte(state)); err != nil {
		log.Printf("loopgate: notify %q: %v", state, err)
	}
}

// ready: the listeners accept (or a reload is over).
func (n *notifier) ready(status string) { n.send("READY=1\nSTATUS=" + status) }

// reloading: a reload begins. MONOTONIC_USEC is CLOCK_MONOTONIC now, which
// systemd (253 and later) checks to tell this reload from an earlier one.
func (n *notifier) reloading() {
	n.send("RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(monotonicUsec(), 10))
}

// stopping: the drain begins.
func (n *notifier) stopping() { n.send("STOPPING=1\nSTATUS=draining") }

// monotonicUsec is CLOCK_MONOTONIC in microseconds.
func monotonicUsec() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano() / int64(time.Microsecond)
}

// close lets go of the socket.
func (n *notifier) close() {
	if n.conn != nil {
		n.conn.Close()
	}
}
