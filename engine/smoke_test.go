package engine_test

import (
	"io"
	"net/http"
	"testing"
)

func TestProxySmoke(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, oneRoute, up)
	resp, err := http.Get(g.url("/x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("got %d %q", resp.StatusCode, b)
	}
	r2, body := g.rawExchange(t, "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
	expectError(t, r2, body, 400, 40001)
	g.expectServing(t)
}
