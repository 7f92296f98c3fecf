// Command tlsload drives a TLS listener for bench/tls.sh: new TLS
// connections in a loop (full handshakes, or resumed ones from a session
// cache), or keep-alive connections at a fixed request rate whose latency
// it reports. wrk cannot do either: it resumes no session per connection
// and measures latency only at saturation.
//
// Usage:
//
//	tlsload -mode handshake -addr 127.0.0.1:PORT [-c 16] [-d 10s] [-tls 1.3] [-resume] [-curves classic]
//	tlsload -mode latency -addr 127.0.0.1:PORT [-c 16] [-rate 2000] [-d 10s]
//
// handshake: -c workers each dial, handshake, send one GET with
// Connection: close, read the whole response and close, again and again.
// With -resume every worker keeps a session cache, so after its first
// connection each handshake resumes (a TLS 1.2 ticket or a TLS 1.3 PSK).
// It prints one line: handshakes=N resumed=N errors=N seconds=S rate=R.
//
// latency: -c keep-alive connections share -rate requests a second, each
// sent at its scheduled time; a request's latency runs from that time to
// the end of its response, so a stall delays the requests behind it and
// shows in their latency too (no coordinated omission). It prints
// requests=N errors=N p50_ms= p99_ms= p999_ms= max_ms=.
//
// The client does not verify the server's certificate: the bench measures
// the server's work, and verification would cost the load CPU alone.
// Loopback addresses only. It exits non-zero when every attempt failed.
package main
