// Write: the raw send while gnet holds nothing for the connection, gnet's
// Write for the rest.

package sockio

import "github.com/panjf2000/gnet/v2"

// Write sends p to gc in order behind anything gnet queued for it; on gc's
// event loop. whole reports that all of p went straight to the socket, so
// nothing is queued for gc now that was not before (a caller that counts
// queued bytes need not ask again). err is gnet Write's: the connection
// failed and gnet closed it, its OnClose already run. A connection without
// a socket of its own (Fd < 0, as a test's fake has) always takes gnet's
// Write.
func Write(gc gnet.Conn, p []byte) (whole bool, err error) {
	if fd := gc.Fd(); fd >= 0 && gc.OutboundBuffered() == 0 {
		n, errno := Send(fd, p)
		if errno == 0 {
			if n == len(p) {
				return true, nil
			}
			p = p[n:] // the socket's buffer is full: gnet queues the rest
		}
		// EAGAIN queues all of p; any other error is gnet's to meet
		// again, report and close on.
	}
	_, err = gc.Write(p)
	return false, err
}
