// Command slowbackend is the slow upstream of `make bench-isolation`: an
// HTTP/1.1 server that answers every request with 200 and the body
// "slow\n" after a delay, which can be changed while it runs.
//
// Usage:
//
//	slowbackend -addr 127.0.0.1:PORT [-delay 2s] [-fast /fast]
//
// With -fast, paths under that prefix are answered at once: one node
// serving a slow route and a fast route, an upstream they share.
// The path /delay is its control endpoint and is answered at once:
// GET /delay prints the current delay, POST /delay?d=DURATION sets it
// (a Go duration, 0s or more) for requests that arrive from then on.
// A request already waiting keeps the delay it started with, and stops
// waiting, unanswered, when its client goes away.
package main
