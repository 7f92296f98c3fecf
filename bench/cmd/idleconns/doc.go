// Command idleconns measures what an idle keep-alive client connection costs
// a gateway in resident memory.
//
// It sends one warm-up request, reads the gateway's VmRSS and open file
// count from /proc, then opens N connections to the gateway. Each one sends
// a single GET, reads the whole response and then stays open and idle. Once
// all are open it waits a moment for the gateway to settle, reads VmRSS
// again, reports the growth per connection, closes every connection and
// reads VmRSS a last time.
//
// Usage (bench/idle.sh wraps it and raises the open-file limit):
//
//	idleconns -addr 127.0.0.1:PORT -pid GATEWAY_PID [-n 10000]
//
// It dials loopback only, bounds every exchange with a deadline and the
// whole run with -deadline, and exits non-zero when any connection failed,
// because a per-connection figure over fewer connections than asked for
// would mislead.
package main
