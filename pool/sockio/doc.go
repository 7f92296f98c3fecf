// Package sockio writes to a gnet connection's non-blocking socket without
// the scheduler's syscall bookkeeping. That is its one job.
//
// gnet's Write sends with write(2) through package syscall, which wraps
// every call in the runtime's entersyscall/exitsyscall (about 300
// instructions a call) in case the call blocks. A send on a non-blocking
// socket never blocks, so Write makes it a raw send(2) instead
// (MSG_NOSIGNAL|MSG_DONTWAIT: a reset peer is an EPIPE, not a SIGPIPE),
// while gnet holds nothing queued for the connection, so the bytes keep
// their order. What the socket does not take, and every error, goes to
// gnet's Write as before: it queues the rest and watches for the socket to
// become writable, or closes the connection and reports the error through
// OnClose. Whatever counts a connection's queued bytes keeps asking gnet's
// OutboundBuffered: only gnet ever holds them.
//
// Write runs on the connection's event loop, as gnet's Write does. Send
// and Recv are the raw calls themselves, for a socket gnet no longer
// polls (a half-closed tunnel's duplicate).
package sockio
