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
// The life of a request, in the files a request meets them. One field, the
// exchange's phase (exchange.go), says where it is:
//
//	client.go     OnTraffic(client) -> serve: parse head (codec), edge limits -> start
//	phases.go     run, the driver: routing -> filtering (a park and its
//	              resume: inbox.go) -> 100 Continue -> a small body held
//	              whole (buffering) -> breaker and isolation permit
//	              (admission.go, over package policy; waiting:
//	              isolationqueue.go) -> attempting:
//	              callUpstream, the upstream head (forward.go), Call.Start
//	reqbody.go    -> CallReady -> pumpBody: the body to the upstream
//	response.go   -> response head -> response filters -> client head and body
//	retry.go      -> on a safe failure, the same request on another node
//	exchange.go   -> respond, done; loop.go putExchange: done filters, logs
//	              (accesslog.go) and metrics; client back to idle, next
//	              pipelined request.
//
// Every failure becomes a JSON error {"code":NNNNN,"message":"...",
// "request_id":"..."} when nothing of the response has been sent yet, and a
// closed client connection otherwise, so a truncated body never looks whole.
// See docs/architecture.md for the state machines and the reasoning.
package engine
