// Tests for the one request/response exchange that makes a connection idle.
package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestExchange(t *testing.T) {
	request := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	cases := []struct {
		name    string
		reply   string
		hangUp  bool   // server closes its end after replying
		wantErr string // "" for success
	}{
		{"keep-alive 200", "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello world\n", false, ""},
		{"error status", "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", false, "status 404"},
		{"closing 200", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false, "closed the connection"},
		{"truncated body", "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhel", true, "EOF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			go func() {
				defer func() {
					if c.hangUp {
						server.Close()
					}
				}()
				if _, err := http.ReadRequest(bufio.NewReader(server)); err != nil {
					return
				}
				io.WriteString(server, c.reply)
			}()

			err := exchange(context.Background(), client, request)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("got %v, want success", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}
