// Tests for the headers filter.

package transform

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/filterstest"
)

func TestHeaders(t *testing.T) {
	req := &HeaderOps{
		Set:    map[string]string{"X-Env": "prod", "Host": "internal.svc"},
		Add:    map[string]string{"X-Tag": " gateway "},
		Remove: []string{"Cookie", "X-Debug"},
	}
	resp := &HeaderOps{Set: map[string]string{"Cache-Control": "no-store"}, Remove: []string{"Server"}}
	f := newHeaders(t, req, resp)
	r, _ := request(t, "GET / HTTP/1.1", "Host: a")
	x := exchange(r, "192.0.2.1")
	if v := f.Request(x); v != filters.Continue {
		t.Fatalf("verdict %v", v)
	}
	if got := fmt.Sprint(x.ReqEdits.Remove); got != "[Cookie X-Debug]" {
		t.Errorf("request removes %s", got)
	}
	if got := editList(x.ReqEdits.Set); got != "Host=internal.svc X-Env=prod" {
		t.Errorf("request sets %s", got)
	}
	if got := editList(x.ReqEdits.Append); got != "X-Tag=gateway" {
		t.Errorf("request appends %s", got)
	}
	if len(x.RespEdits.Set)+len(x.RespEdits.Remove) != 0 {
		t.Errorf("response edits queued in the request phase: %+v", x.RespEdits)
	}
	f.Response(x)
	if got := editList(x.RespEdits.Set); got != "Cache-Control=no-store" || fmt.Sprint(x.RespEdits.Remove) != "[Server]" {
		t.Errorf("response edits %+v", x.RespEdits)
	}
}

func editList(hs []filters.Header) string {
	var parts []string
	for _, h := range hs {
		parts = append(parts, h.Name+"="+string(h.Value))
	}
	return strings.Join(parts, " ")
}

func TestHeadersNilOps(t *testing.T) {
	f := newHeaders(t, nil, nil)
	r, _ := request(t, "GET / HTTP/1.1", "Host: a")
	x := exchange(r, "192.0.2.1")
	f.Request(x)
	f.Response(x)
	if len(x.ReqEdits.Set)+len(x.ReqEdits.Remove)+len(x.ReqEdits.Append)+len(x.RespEdits.Set) != 0 {
		t.Errorf("edits queued: %+v %+v", x.ReqEdits, x.RespEdits)
	}
}

func TestHeadersRefused(t *testing.T) {
	many := map[string]string{}
	for i := 0; i <= MaxHeaderOps; i++ {
		many[fmt.Sprintf("X-H%d", i)] = "v"
	}
	for name, ops := range map[string]*HeaderOps{
		"bad name":           {Set: map[string]string{"X Bad": "v"}},
		"empty name":         {Add: map[string]string{"": "v"}},
		"CRLF injection":     {Set: map[string]string{"X-A": "v\r\nX-Injected: 1"}},
		"NUL in value":       {Add: map[string]string{"X-A": "v\x00"}},
		"content-length":     {Set: map[string]string{"content-length": "0"}},
		"transfer-encoding":  {Remove: []string{"Transfer-Encoding"}},
		"connection":         {Add: map[string]string{"Connection": "close"}},
		"bad name in remove": {Remove: []string{"X:A"}},
		"too many":           {Set: many},
	} {
		if p := filterstest.Check(&HeadersRoute{Request: ops}, nil, &filters.RouteInfo{}); len(p) == 0 {
			t.Errorf("%s: request ops accepted", name)
		}
		if p := filterstest.Check(&HeadersRoute{Response: ops}, nil, &filters.RouteInfo{}); len(p) == 0 {
			t.Errorf("%s: response ops accepted", name)
		}
	}
}
