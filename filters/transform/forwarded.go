// The forwarded filter: X-Forwarded-For, -Proto, -Host and X-Real-IP.

package transform

import (
	"net/netip"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
)

type forwarded struct {
	filters.Base
	trusted []netip.Prefix // the peers whose forwarding headers are kept
	peers   []peerMemo     // per loop: the peer it last wrote out, touched only by that loop
}

// peerMemo is one loop's last peer address and its text, so that the
// requests of a keep-alive connection (and of every client at one
// address) do not format the same address again. The text is copied into
// each exchange's arena: the memo changes with the loop's next peer.
type peerMemo struct {
	addr netip.Addr
	n    int               // len of text in use; 0 = no peer memoised
	text [maxPeerText]byte // addr's text (netip.Addr.AppendTo)
	_    [32]byte          // 128 bytes: keep loops' memos on separate cache lines
}

// maxPeerText is the longest peer text a memo holds: an IPv6 address's 45
// bytes and a zone of up to 18. A longer one is formatted each time.
const maxPeerText = 64

var _ filters.Filter = (*forwarded)(nil)

// The X-Forwarded-Proto values. Read-only.
var (
	protoHTTP  = []byte("http")
	protoHTTPS = []byte("https")
)

// NewForwarded returns the "forwarded" filter, which tells the upstream who
// the client is, for a server of loops event loops (Exchange.Loop indexes
// its per-loop memo of the last peer's text). trusted are the trusted
// proxies (config trusted_proxies, the list given to access.ClientIP).
// The rule:
//
//   - X-Forwarded-For: when the TCP peer is a trusted proxy, the incoming
//     list (every field, joined with ", ") is kept and the peer appended;
//     otherwise it becomes the peer alone, so a client cannot plant
//     addresses in it.
//   - X-Real-IP: the client IP (x.ClientIP, from access.ClientIP).
//   - X-Forwarded-Proto and X-Forwarded-Host: a trusted peer's values are
//     kept; otherwise the scheme the request came in on ("https" on an
//     HTTPS listener, where x.TLS is set, else "http") and the request's
//     Host. Only a trusted peer's request is searched for them.
//
// Each header is set (replacing incoming fields) or, when no value is known
// (no peer address, no Host), removed. Values are built in the exchange's
// arena. Safe for concurrent use.
func NewForwarded(order int, trusted []netip.Prefix, loops int) filters.Filter {
	return &forwarded{
		Base:    filters.Base{FilterName: NameForwarded, FilterOrder: order},
		trusted: append([]netip.Prefix(nil), trusted...),
		peers:   make([]peerMemo, max(loops, 0)),
	}
}

// Request queues the four upstream edits. It does not allocate once the
// exchange's arena and edit lists have grown (an incoming X-Forwarded-For
// beyond 16 KiB is the exception, see reserve).
func (f *forwarded) Request(x *filters.Exchange) filters.Verdict {
	peer := x.Peer.Unmap()
	fromProxy := peer.IsValid() && access.Contains(f.trusted, peer)
	h := x.Req.Headers
	e := &x.ReqEdits

	var buf [maxPeerText]byte // the longest IPv6 text is 45 bytes, plus a short zone
	ok := true                // every edit must land: a full list would let spoofed values through
	var peerText []byte       // the peer alone, in the arena, when X-Forwarded-For is just that
	switch p := f.peerText(x.Loop, peer, buf[:0]); {
	case fromProxy:
		ok = e.AddSet("X-Forwarded-For", appendForwardedFor(x, p))
	case len(p) > 0:
		peerText = x.Own(p)
		ok = e.AddSet("X-Forwarded-For", peerText)
	default:
		ok = e.AddRemove("X-Forwarded-For")
	}

	if c := x.ClientIP.Unmap(); c.IsValid() {
		// The client is most often the peer itself: its text is made once.
		if peerText == nil || c != peer {
			peerText = x.Own(c.AppendTo(buf[:0]))
		}
		ok = ok && e.AddSet("X-Real-IP", peerText)
	} else {
		ok = ok && e.AddRemove("X-Real-IP")
	}

	if !fromProxy || !has(h, "X-Forwarded-Proto") {
		proto := protoHTTP
		if x.TLS != nil { // the request came over an HTTPS listener
			proto = protoHTTPS
		}
		ok = ok && e.AddSet("X-Forwarded-Proto", proto)
	}
	if !fromProxy || !has(h, "X-Forwarded-Host") {
		if len(x.Req.Host) > 0 {
			ok = ok && e.AddSet("X-Forwarded-Host", x.Own(x.Req.Host))
		} else {
			ok = ok && e.AddRemove("X-Forwarded-Host")
		}
	}
	if !ok {
		return x.Reject(500, 50001, "forwarded: too many header edits")
	}
	return filters.Continue
}

// peerText is peer's text (empty for no address): loop's memo when it
// last wrote out the same address, else formatted into buf and memoised.
// The result is valid until the loop's next call; copy it to keep it.
func (f *forwarded) peerText(loop int, peer netip.Addr, buf []byte) []byte {
	if !peer.IsValid() {
		return nil
	}
	if loop < 0 || loop >= len(f.peers) {
		return peer.AppendTo(buf)
	}
	m := &f.peers[loop]
	if m.n > 0 && m.addr == peer {
		return m.text[:m.n]
	}
	p := peer.AppendTo(buf)
	if len(p) <= len(m.text) {
		m.addr, m.n = peer, copy(m.text[:], p)
	}
	return p
}

// has reports whether h has a field called name.
func has(h codec.Headers, name string) bool {
	_, ok := header(h, name)
	return ok
}

// appendForwardedFor joins the incoming X-Forwarded-For fields and peer
// into one value in the arena: "a, b, peer".
func appendForwardedFor(x *filters.Exchange, peer []byte) []byte {
	h := x.Req.Headers
	n := len(peer)
	for i := range h {
		if v := h[i].Value; len(v) > 0 && codec.EqualFold(h[i].Name, "X-Forwarded-For") {
			n += len(v) + len(", ")
		}
	}
	out := reserve(x, n)
	w := 0
	for i := range h {
		if v := h[i].Value; len(v) > 0 && codec.EqualFold(h[i].Name, "X-Forwarded-For") {
			w += copy(out[w:], v)
			w += copy(out[w:], ", ")
		}
	}
	copy(out[w:], peer)
	return out
}
