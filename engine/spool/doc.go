// Package spool holds bytes bound for a gnet connection whose peer reads
// slower than the other side writes.
//
// gnet cannot pause reading a socket, so a proxy that forwards a large
// response to a slow client would otherwise hold the whole body in memory.
// A Spool keeps at most a high-water mark of bytes in the connection's
// outbound buffer and appends the rest to an unlinked temporary file, as
// nginx does with proxy_temp_path; Pump moves file bytes back to the
// connection as its buffer drains. Memory per connection stays bounded by the
// high-water mark, and disk by the file limit.
//
// File reads and writes run on the loop. They hit the page cache and are
// short, but they are syscalls that can block on a saturated disk; that is
// the price of bounded memory, and the reason spilling only starts once the
// client has fallen a full high-water mark behind.
//
// A Spool belongs to one loop and is not safe for concurrent use.
package spool
