// Package engine is Loopgate's data plane: a gnet event handler that owns N
// event loops and carries every request from accept to response on one loop.
//
// Each loop owns its client connections, a timer wheel, the upstream
// connection pools enrolled on the same loop (package upstream), scratch
// parse state and a pointer to the immutable route snapshot. A request never
// crosses threads: the client's bytes are parsed, routed, filtered, written
// to a pooled upstream connection, and the upstream's response is written
// back to the client, all inside gnet callbacks of that loop. A node given
// by IP address is even connected on the loop (upstream.DialOnLoop,
// adopt_linux.go). Three things leave it: a connect that must wait for the
// network or for DNS, the timer tick, and the answer of a parked request,
// which may come from any goroutine through its ticket (inbox.go). They
// return through EventLoop.Execute or the loop's round bell.
//
// The life of a request, in the files a request meets them:
//
//	client.go     OnTraffic(client) -> serve: parse head (codec), edge limits
//	phases.go     -> route (router snapshot) -> request filters (may park)
//	bodybuffer.go -> a small body read and validated whole
//	phases.go     -> breaker, isolation permit -> callUpstream
//	forward.go    -> the upstream head, hop-by-hop headers out
//	exchange.go   -> Call.Start (pool: idle conn, dial, or wait) -> body pump
//	response.go   -> response head -> response filters -> client head and body
//	retry.go      -> on a safe failure, the same request on another node
//	exchange.go   -> done: done filters, logs and metrics, connection back
//	              to the pool, client back to idle, next pipelined request.
//
// Every failure becomes a JSON error {"code":NNNNN,"message":"...",
// "request_id":"..."} when nothing of the response has been sent yet, and a
// closed client connection otherwise, so a truncated body never looks whole.
// See docs/architecture.md for the state machines and the reasoning.
package engine
