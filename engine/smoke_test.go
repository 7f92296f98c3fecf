package engine_test

import "testing"

func TestProxySmoke(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, oneRoute, up)
	r := fetch(g.url("/x"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.resp.StatusCode != 200 || string(r.body) != "ok" {
		t.Fatalf("got %d %q", r.resp.StatusCode, r.body)
	}
	r2, body := g.rawExchange(t, "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
	expectError(t, r2, body, 400, 40001)
	g.expectServing(t)
}
