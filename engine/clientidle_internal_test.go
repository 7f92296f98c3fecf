// The keep-alive idle timer left armed across requests (clientConn.idle,
// timerDue): a timer due before the connection's latest idle deadline waits
// for the rest, and the connection closes once that deadline passes.

package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/panjf2000/gnet/v2"
)

func TestIdleTimerKeptAcrossRequests(t *testing.T) {
	up := listen(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\ntimeouts: {idle: 1h}\nupstreams:\n  - {name: b, nodes: [\"%s\"]}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", up)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := ServeForTest(t, srv)
	l := srv.loops[0]
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("response %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// onLoop runs f on the loop with the client's connection, in Idle.
	onLoop := func(f func(cc *clientConn) string) {
		t.Helper()
		res := make(chan string, 1)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if err := l.eventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				for cc := l.clients.head.next; cc != &l.clients.head; cc = cc.next {
					if cc.gc.RemoteAddr().String() == c.LocalAddr().String() && cc.state == stateIdle {
						res <- f(cc)
						return nil
					}
				}
				res <- "retry"
				return nil
			})); err != nil {
				t.Fatal(err)
			}
			msg := <-res
			if msg != "retry" {
				if msg != "" {
					t.Fatal(msg)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the client's connection never went idle")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	onLoop(func(cc *clientConn) string {
		if cc.timerDue == 0 || !cc.timer.Armed() || cc.timerDue > cc.idleUntil || cc.timerDue == cc.idleUntil {
			return fmt.Sprintf("the first idle wait's timer was not kept: due %d, deadline %d, armed %v", cc.timerDue, cc.idleUntil, cc.timer.Armed())
		}
		// It fires (early for this wait): it waits for the rest.
		cc.timer.Stop()
		cc.onTimer()
		if cc.state != stateIdle || !cc.timer.Armed() || cc.timerDue != cc.idleUntil {
			return fmt.Sprintf("a timer due before the idle deadline: state %s, armed %v, due %d, deadline %d", cc.state, cc.timer.Armed(), cc.timerDue, cc.idleUntil)
		}
		// Past the deadline it closes the connection.
		cc.idleUntil = l.timerNow() - 1
		cc.timer.Stop()
		cc.onTimer()
		if cc.state != stateClosed {
			return fmt.Sprintf("past the idle deadline: state %s", cc.state)
		}
		return ""
	})
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the idle connection was not closed: %v", err)
	}
}
