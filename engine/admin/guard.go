// guard: the checks every admin request passes before its handler, so that
// no web page a browser shows can use the admin port.

package admin

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/loopgate/loopgate/codec"
)

// intentHeader marks a request as sent on purpose by a program or a
// person, not by a page: a browser sends a custom header cross-origin only
// after a CORS preflight, and the admin port grants none.
const intentHeader = "X-Loopgate-Admin"

// guard refuses, in this order and for every path:
//
//   - a Host that is not loopback, the address the connection arrived on,
//     or one of Options.Hosts: 421, code 42101. A page whose name was
//     rebound to 127.0.0.1 (DNS rebinding) is same-origin to the browser,
//     but its requests carry its own name;
//   - a request a browser marks as coming from another site or origin
//     (Sec-Fetch-Site, Origin): 403, code 40303;
//   - a state change (any method but GET and HEAD) without the
//     X-Loopgate-Admin header, a bearer token or a JSON body: 403, code
//     40304. A form post, or a fetch that needs no preflight, can carry
//     none of them.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !s.hostAllowed(r):
			s.fail(w, http.StatusMisdirectedRequest, 42101,
				"host not allowed: the admin port serves localhost, loopback addresses, the address it is reached on, and the names in admin.hosts")
		case crossSite(r):
			s.fail(w, http.StatusForbidden, 40303, "cross-site request refused: the admin port serves no other site or origin")
		case r.Method != http.MethodGet && r.Method != http.MethodHead && !intended(r):
			s.refuseUnintended(w)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// needIntent holds next, whatever the method, to guard's rule for a state
// change.
func (s *Server) needIntent(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !intended(r) {
			s.refuseUnintended(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) refuseUnintended(w http.ResponseWriter) {
	s.fail(w, http.StatusForbidden, 40304,
		"this needs the header X-Loopgate-Admin: 1 or Content-Type: application/json, which web pages cannot send; forms, text posts and plain links are refused")
}

// intended reports whether r carries what a page cannot make a browser
// send without a preflight: the intent header, a bearer token, or a JSON
// content type
// (CORS lets only forms and text/plain through unasked).
func intended(r *http.Request) bool {
	if r.Header.Get(intentHeader) != "" {
		return true
	}
	// A bearer token is a header no browser attaches by itself (it does
	// attach Basic credentials it has cached, so those count for nothing).
	if scheme, _, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return true
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// crossSite reports whether a browser marked r as coming from elsewhere:
// a Sec-Fetch-Site other than same-origin or none (a typed URL, a
// bookmark), or an Origin that is not the admin port's own. same-site is
// refused too: a page on another port of the same host is same-site.
// Programs send neither header.
func crossSite(r *http.Request) bool {
	for _, v := range r.Header.Values("Sec-Fetch-Site") {
		if v != "same-origin" && v != "none" {
			return true
		}
	}
	for _, o := range r.Header.Values("Origin") {
		if !sameOrigin(o, r.Host) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether origin (RFC 6454 serialised, "null" for an
// opaque one) is http:// and host, compared as Host headers compare.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" {
		return false
	}
	on, op, err1 := codec.NormalizeHost(nil, []byte(u.Host))
	hn, hp, err2 := codec.NormalizeHost(nil, []byte(host))
	return err1 == nil && err2 == nil && len(hn) > 0 && string(on) == string(hn) && httpPort(op) == httpPort(hp)
}

func httpPort(p int) int {
	if p < 0 {
		return 80
	}
	return p
}

// hostAllowed reports whether r's Host names the admin port: localhost,
// a loopback address, the address its connection arrived on (what a
// kubelet probe or a scraper using the pod IP sends, even when the port
// is bound to 0.0.0.0), or one of Options.Hosts. The port is not
// compared. An empty Host (HTTP/1.0, some load balancers' health checks)
// is served: no browser sends one.
func (s *Server) hostAllowed(r *http.Request) bool {
	if r.Host == "" {
		return true
	}
	name, _, err := codec.NormalizeHost(nil, []byte(r.Host))
	if err != nil {
		return false
	}
	key := hostKey(string(name))
	if key == "localhost" || s.hosts[key] {
		return true
	}
	ip, err := netip.ParseAddr(key)
	if err != nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if ta, ok := local.(*net.TCPAddr); ok {
		if l, ok := netip.AddrFromSlice(ta.IP); ok && l.Unmap() == ip {
			return true
		}
	}
	return false
}

// hostKey is the form Host names are compared in: an IP address in
// netip's canonical text, without brackets or an IPv4-mapped prefix, so
// "[::FFFF:127.0.0.1]" and "127.0.0.1" are one; a name as given (already
// lower-cased, its trailing dot dropped, by codec.NormalizeHost).
func hostKey(name string) string {
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")); err == nil {
		return ip.Unmap().String()
	}
	return name
}

// hostSet is Options.Hosts by hostKey. Config validation has refused what
// codec.NormalizeHost does not accept; such an entry matches nothing.
func hostSet(hosts []string) map[string]bool {
	set := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		if name, _, err := codec.NormalizeHost(nil, []byte(h)); err == nil && len(name) > 0 {
			set[hostKey(string(name))] = true
		}
	}
	return set
}
