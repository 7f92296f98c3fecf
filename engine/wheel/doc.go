// Package wheel is the per-event-loop timer wheel that drives every deadline
// in Loopgate: header read, keep-alive idle, upstream response and pool
// acquire.
//
// gnet has no timer API (EventLoop.Schedule is unimplemented), so each loop
// owns one Wheel and a ticker goroutine posts Advance to the loop through
// EventLoop.Execute. Timers are intrusive: an owner embeds a Timer, calls Init
// once with its callback, and then arms and stops it as often as it likes
// without allocating. A Wheel and its Timers belong to one loop goroutine and
// are not safe for concurrent use.
//
// Resolution is one tick (10 ms by default). A timer fires no earlier than its
// duration and at most one tick plus the loop's scheduling delay later.
package wheel
