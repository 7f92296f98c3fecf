// Command fixedload sends a fixed number of keep-alive GET requests, one at
// a time on each of a few connections, and checks every response is a 200
// framed by Content-Length. bench/instructions.sh drives a gateway under
// valgrind with it: a fixed request count, unlike wrk's fixed duration,
// makes the gateway's instruction count per request comparable from one
// build to the next.
//
// Usage:
//
//	fixedload -addr 127.0.0.1:PORT [-n 2000] [-c 4] [-H 'Name: value']
//
// -n is the requests per connection, -c the connections. It exits non-zero
// on a connection error or any response other than a 200.
package main
