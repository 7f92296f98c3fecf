// Package buffers holds the benchmark behind the netpoll decision in
// docs/architecture.md: Loopgate's reference-counted pool against netpoll's
// LinkBuffer on the two jobs buffers do on the hot path — holding a
// rewritten request head until the upstream answers, and staging a body
// chunk between two sockets.
package buffers
