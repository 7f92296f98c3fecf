// Connection lists that mix hop-by-hop tokens with names of other fields:
// appendEndToEnd skips the per-field Listed scan when every listed token is
// hop-by-hop already, so a list must be read to its last token.

package engine_test

import (
	"testing"
)

func TestProxyConnectionListMixedTokens(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(func(*rawRequest) string {
		return "HTTP/1.1 200 OK\r\n" +
			"Content-Length: 2\r\n" +
			"Connection: keep-alive, X-Internal\r\n" +
			"X-Internal: secret\r\n" +
			"X-Public: yes\r\n" +
			"\r\nok"
	}))
	g := startGateway(t, oneRoute, up.addr)
	c := g.client(t)
	c.send("GET /h HTTP/1.1\r\n" +
		"Host: example.com\r\n" +
		"Connection: Upgrade ,keep-alive,  X-Secret\r\n" +
		"X-Secret: 1\r\n" +
		"Connection: close\r\n" +
		"Close: 1\r\n" +
		"X-Kept: yes\r\n" +
		"\r\n")
	resp, body := readResponse(t, c.br, "GET")
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	r := up.requests()[0].req
	for _, name := range []string{"Connection", "X-Secret", "Close"} {
		if v, ok := r.Header[name]; ok {
			t.Errorf("upstream got %s: %q, which the client's Connection lists", name, v)
		}
	}
	if r.Header.Get("X-Kept") != "yes" {
		t.Errorf("end-to-end header lost: %q", r.Header)
	}
	if v, ok := resp.Header["X-Internal"]; ok {
		t.Errorf("client got X-Internal: %q, which the upstream's Connection lists", v)
	}
	if resp.Header.Get("X-Public") != "yes" {
		t.Errorf("end-to-end response header lost: %q", resp.Header)
	}
}
