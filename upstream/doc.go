// Package upstream is Loopgate's per-loop HTTP/1.1 client: connection pools,
// load balancers and the asynchronous call that carries one request to an
// upstream node and its response back.
//
// Everything here is owned by one gnet event loop. A Loop holds, for every
// upstream node, a Pool of keep-alive connections enrolled on that same loop,
// so taking and returning a connection is a free-list operation with no
// synchronisation. Only dialing leaves the loop: a goroutine dials with a
// connect timeout, enrolls the socket with EventLoop.Enroll, and the result
// returns through OnOpen or EventLoop.Execute.
//
// A Call is the async client context for one exchange. Its state moves
//
//	Init -> Sending -> Sent -> Received -> Done
//	  any non-terminal state -> Failed | Timeout
//
// and every event (connection ready, response head, body bytes, failure) is
// delivered to the Call's Receiver on the loop. The same Call serves proxied
// requests and gateway sub-requests such as an external auth check.
package upstream
