// Accepting client connections: what an accept error does, and the series
// that count them. The loop's own accept is in accept_linux.go.

package engine

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
	"syscall"
	"time"
)

// Accept back-off: after an accept error that is not about one connection
// (no descriptor, no memory), the loop stops polling its listener for
// acceptRetryMin, then twice as long after each failed retry, up to
// acceptRetryMax. New connections wait in the kernel's listen queue
// meanwhile, as nginx leaves them (it disables accept events for
// accept_mutex_delay, 500ms). A successful accept resets the delay.
const (
	acceptRetryMin = 10 * time.Millisecond
	acceptRetryMax = 500 * time.Millisecond
)

// acceptReason is the label of loopgate_accept_errors_total.
type acceptReason int

const (
	acceptEMFILE  acceptReason = iota // the process's descriptor limit (RLIMIT_NOFILE)
	acceptENFILE                      // the system's file table (fs.file-max)
	acceptENOBUFS                     // ENOBUFS or ENOMEM: socket memory
	acceptAborted                     // one connection failed before it was accepted; the next is tried at once
	acceptOther                       // anything else; backed off like the resource errors
	acceptReasons
)

func (r acceptReason) String() string {
	switch r {
	case acceptEMFILE:
		return "emfile"
	case acceptENFILE:
		return "enfile"
	case acceptENOBUFS:
		return "enobufs"
	case acceptAborted:
		return "aborted"
	}
	return "other"
}

// classifyAccept sorts an accept4 error. Linux passes a connection's own
// pending network error up through accept (accept(2), "Error handling"):
// those, and a connection reset or aborted while it waited, concern that
// connection only.
func classifyAccept(err error) acceptReason {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return acceptOther
	}
	switch errno {
	case syscall.EMFILE:
		return acceptEMFILE
	case syscall.ENFILE:
		return acceptENFILE
	case syscall.ENOBUFS, syscall.ENOMEM:
		return acceptENOBUFS
	case syscall.EINTR, syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO, syscall.EPERM,
		syscall.ENETDOWN, syscall.ENOPROTOOPT, syscall.EHOSTDOWN,
		syscall.EHOSTUNREACH, syscall.EOPNOTSUPP, syscall.ENETUNREACH:
		return acceptAborted
	}
	return acceptOther
}

// nextAcceptRetry doubles the back-off d within its bounds.
func nextAcceptRetry(d time.Duration) time.Duration {
	switch {
	case d < acceptRetryMin:
		return acceptRetryMin
	case d >= acceptRetryMax/2:
		return acceptRetryMax
	}
	return 2 * d
}

// acceptStats are the server's accept counters, written by the loops.
type acceptStats struct {
	errors [acceptReasons]atomic.Uint64
	paused atomic.Int64 // loops whose listener is paused now
}

// writeAcceptSeries is the metrics.Set writer for the accept series.
func (s *Server) writeAcceptSeries(w io.Writer) {
	var b bytes.Buffer
	p := promWriter{b: &b}
	p.family("loopgate_accept_errors_total", "counter", "accept(2) failures on the client listeners, by reason; every reason but aborted pauses the loop's listener for a while.")
	for r := range acceptReasons {
		p.sample("loopgate_accept_errors_total", p.labels("reason", r.String()), s.accepts.errors[r].Load())
	}
	p.family("loopgate_accept_paused_loops", "gauge", "Loops whose listener is paused after an accept error; new connections wait in the listen queue.")
	p.gauge("loopgate_accept_paused_loops", "", s.accepts.paused.Load())
	_, _ = w.Write(b.Bytes())
}
