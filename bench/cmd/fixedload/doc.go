// Command fixedload sends a fixed number of keep-alive GET requests, one at
// a time on each of a few connections, and checks every response is a 200
// framed by Content-Length. bench/instructions.sh drives a gateway under
// valgrind with it: a fixed request count, unlike wrk's fixed duration,
// makes the gateway's instruction count per request comparable from one
// build to the next.
//
// Usage:
//
//	fixedload -addr 127.0.0.1:PORT [-n 2000] [-c 4] [-H 'Name: value'] [-close]
//
// -n is the requests per connection, -c the connections. With -close each
// request opens a connection of its own and asks to close it
// (Connection: close), and the gateway must close it after the response:
// -c clients making -n connections each. It exits non-zero on a
// connection error or any response other than a 200.
package main
