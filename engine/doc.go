// Package engine is Loopgate's data plane: a gnet event handler that owns N
// event loops and carries every request from accept to response on one loop.
//
// Each loop owns its client connections, a timer wheel, the upstream
// connection pools enrolled on the same loop (package upstream), scratch
// parse state and a pointer to the immutable route snapshot. A request never
// crosses threads: the client's bytes are parsed, routed, written to a pooled
// upstream connection, and the upstream's response is written back to the
// client, all inside gnet callbacks of that loop. Only dialing leaves the
// loop, and the answer of a parked request may come from any goroutine
// through its ticket (inbox.go); both return through EventLoop.Execute.
//
// The life of a request, as the driver in client.go, exchange.go and
// response.go runs it:
//
//	OnTraffic(client) -> serve: parse head (codec) -> route (router snapshot)
//	  -> build upstream head -> Call.Start (pool: idle conn, dial, or wait)
//	  -> CallReady: stream request body -> ResponseHead: write client head
//	  -> ResponseBody...: stream body -> done: connection back to the pool,
//	  client back to idle, next pipelined request.
//
// Every failure becomes a JSON error {"code":NNNNN,"message":"...",
// "request_id":"..."} when nothing of the response has been sent yet, and a
// closed client connection otherwise, so a truncated body never looks whole.
// See docs/architecture.md for the state machines and the reasoning.
package engine
