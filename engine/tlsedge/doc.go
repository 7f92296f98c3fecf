// Package tlsedge terminates and originates TLS for connections that live on
// gnet event loops, with the standard library's crypto/tls.
//
// crypto/tls is written for blocking connections: a handshake that runs out
// of bytes waits for more, which an event loop must never do. So a
// connection's life is split in two phases, both driven by a Session:
//
//   - The handshake runs off the loop, on a goroutine of a bounded Runner
//     (at most MaxConcurrent at once, at most MaxQueued more waiting for a
//     slot, each within Timeout from accept). The loop feeds it the bytes
//     the peer sends and writes what it answers; they meet through two
//     small channels the loop only ever uses without blocking: the
//     handshake asks for input (one request outstanding at a time, so the
//     loop's send always finds room) and posts its output, and the loop
//     answers on its own turn (Poster). A peer that sends its hello one byte
//     at a time costs one wake-up per byte and a goroutine parked on a
//     channel, never a loop.
//   - Once the handshake is done the loop owns the tls.Conn. Its transport
//     reads from the gnet connection's input buffer and returns a temporary
//     net.Error ("would block") when it is empty: crypto/tls keeps the
//     partial record and does not make such an error permanent (see
//     readRecordOrCCS in crypto/tls/conn.go), so Read is simply called
//     again when more bytes arrive. Records are decrypted into the
//     Session's plaintext buffer, which the HTTP layer peeks and discards
//     as it did the gnet buffer; writes are encrypted by tls.Conn.Write and
//     queued on the gnet connection, one gnet write per Write call.
//
// Certificates are chosen by SNI (exact name, then wildcard, then the first
// certificate) from a Certificates set that the caller swaps atomically on
// reload; LoadCertificates validates each file as -check does.
package tlsedge
