// State: the lifecycle of a Call.

package upstream

// State is where a Call is in its exchange.
//
// Legal transitions, all made by Call.setState:
//
//	Init     -> Sending  a connection was attached and the head written
//	Sending  -> Sent     the whole request (head and body) was handed to the socket
//	Sending  -> Received the response head arrived while the body was still going out
//	Sent     -> Received the response head arrived
//	Received -> Done     the response body is complete
//	Sending, Sent -> Init a reused connection closed before any response
//	                     byte: the (idempotent, bodiless) request is retried
//	                     once on a fresh connection
//	Init, Sending, Sent, Received -> Failed | Timeout
type State uint8

const (
	Init State = iota
	Sending
	Sent
	Received
	Done
	Failed
	Timeout
)

var stateNames = [...]string{"INIT", "SENDING", "SENT", "RECEIVED", "DONE", "FAILED", "TIMEOUT"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "UNKNOWN"
}

// Terminal reports whether no more events will be delivered for the call.
func (s State) Terminal() bool { return s >= Done }
