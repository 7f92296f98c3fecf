package main

import (
	"bufio"
	"net"
	"strings"
	"sync/atomic"
	"testing"
)

// serve answers every request on ln with status, counting them.
func serve(t *testing.T, status string, served *atomic.Int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				closing := false
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if strings.EqualFold(strings.TrimSpace(line), "Connection: close") {
						closing = true
					}
					if strings.TrimSpace(line) == "" {
						served.Add(1)
						if _, err := c.Write([]byte("HTTP/1.1 " + status + "\r\nContent-Length: 3\r\n\r\nok\n")); err != nil || closing {
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestRunSendsEveryRequest(t *testing.T) {
	var served atomic.Int64
	addr := serve(t, "200 OK", &served)
	if err := run(addr, 50, 3, "X-Test: 1", false); err != nil {
		t.Fatal(err)
	}
	if got := served.Load(); got != 150 {
		t.Fatalf("served %d requests, want 150", got)
	}
}

func TestRunFailsOnANon200(t *testing.T) {
	var served atomic.Int64
	addr := serve(t, "503 Service Unavailable", &served)
	if err := run(addr, 2, 1, "", false); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err = %v, want the 503 named", err)
	}
}

// With -close every request has a connection of its own, says
// Connection: close, and the server's close after the response ends it.
func TestRunCloseEachOpensAConnectionPerRequest(t *testing.T) {
	var served atomic.Int64
	addr := serve(t, "200 OK", &served)
	if err := run(addr, 20, 2, "", true); err != nil {
		t.Fatal(err)
	}
	if got := served.Load(); got != 40 {
		t.Fatalf("served %d requests, want 40", got)
	}
}
