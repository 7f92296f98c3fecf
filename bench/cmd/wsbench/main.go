// The wsbench command: the `make bench-ws` tools. An upstream that switches
// protocols and echoes, a WebSocket echo load over N tunnels, and N idle
// tunnels with the proxy's RSS growth per tunnel.
//
//	wsbench -mode upstream -listen 127.0.0.1:9000
//	wsbench -mode echo -addr 127.0.0.1:8080 -c 64 -d 10s
//	wsbench -mode echo -addr 127.0.0.1:8080 -c 64 -m 2000
//	wsbench -mode idle -addr 127.0.0.1:8080 -n 10000 -pid 1234
//	wsbench -mode flood -addr 127.0.0.1:8080 -mib 64 -rate 1048576 -pid 1234
//
// With -m the echo makes exactly that many round trips on each tunnel
// instead of running for -d: a fixed load, whose cost a run under valgrind
// or strace counts (bench/wsinstructions.sh).
//
// In flood mode the client pushes -mib MiB as fast as the proxy takes them
// through a tunnel whose upstream reads -rate bytes a second, and reports
// the proxy's peak RSS growth: what a slow reader costs the proxy.
//
// The proxies under test never parse WebSocket frames, so the upstream
// echoes bytes as they come, and the echo client sends one masked 32-byte
// text frame per round trip, as a browser would, and reads 32 bytes back.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	mode := flag.String("mode", "", "upstream, echo or idle")
	listen := flag.String("listen", "", "upstream: address to listen on")
	addr := flag.String("addr", "", "echo, idle: the proxy's address, host:port on loopback")
	conns := flag.Int("c", 64, "echo: tunnels sending at once")
	dur := flag.Duration("d", 10*time.Second, "echo: how long to send")
	msgs := flag.Int("m", 0, "echo: round trips per tunnel, instead of -d")
	count := flag.Int("n", 10000, "idle: tunnels to open")
	pid := flag.Int("pid", 0, "idle, flood: the process whose RSS is read (nginx: its worker)")
	mib := flag.Int("mib", 64, "flood: MiB to push")
	rate := flag.Int("rate", 1<<20, "flood: bytes a second the upstream reads")
	rssLog := flag.String("log", "", "flood: file to append a \"label seconds rss_bytes\" line to each second")
	label := flag.String("label", "proxy", "flood: the first field of each -log line")
	flag.Parse()
	switch *mode {
	case "upstream":
		upstream(*listen)
	case "echo":
		checkLoopback(*addr)
		echo(*addr, *conns, *dur, *msgs)
	case "idle":
		checkLoopback(*addr)
		idle(*addr, *count, *pid)
	case "flood":
		checkLoopback(*addr)
		flood(*addr, *mib, *rate, *pid, *rssLog, *label)
	default:
		flag.Usage()
		os.Exit(2)
	}
}

func checkLoopback(addr string) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fatal(fmt.Errorf("-addr %q must be a loopback host:port", addr))
	}
}

// upstream answers each connection's upgrade request with a 101 and echoes
// what follows.
func upstream(listen string) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fatal(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			fatal(err)
		}
		go func() {
			defer c.Close()
			br := bufio.NewReaderSize(c, 4096)
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
				// A health probe (the bench's wait_ready): a plain 200.
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nhello world\n")
				return
			}
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
				"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
			if r, err := strconv.Atoi(req.URL.Query().Get("rate")); err == nil && r > 0 {
				slowReader(br, r)
				return
			}
			buf := make([]byte, 4096)
			for {
				n, err := br.Read(buf)
				if n > 0 {
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// slowReader reads r at rate bytes a second, in tenths of a second.
func slowReader(r io.Reader, rate int) {
	buf := make([]byte, max(rate/10, 1))
	for {
		start := time.Now()
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		time.Sleep(time.Until(start.Add(100 * time.Millisecond)))
	}
}

// flood pushes mib MiB into a tunnel to an upstream reading rate bytes a
// second and prints "seconds rss_before peak_rss". With a log file it
// appends "label seconds rss" to it each second.
func flood(addr string, mib, rate, pid int, logFile, label string) {
	if pid <= 0 {
		fatal(fmt.Errorf("-pid is required"))
	}
	var samples io.Writer = io.Discard
	if logFile != "" {
		f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fatal(err)
		}
		defer f.Close()
		samples = f
	}
	before := rss(pid)
	c, _, err := openTunnelPath(addr, "/flood?rate="+strconv.Itoa(rate))
	if err != nil {
		fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		buf := make([]byte, 64<<10)
		for sent := 0; sent < mib<<20; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	peak := before
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	lastLog := start
	fmt.Fprintf(samples, "%s 0 %d\n", label, before)
	for {
		select {
		case err := <-done:
			if err != nil {
				fatal(err)
			}
			fmt.Printf("%.1f %d %d\n", time.Since(start).Seconds(), before, max(peak, rss(pid)))
			return
		case now := <-tick.C:
			r := rss(pid)
			peak = max(peak, r)
			if now.Sub(lastLog) >= time.Second {
				lastLog = now
				fmt.Fprintf(samples, "%s %.0f %d\n", label, now.Sub(start).Seconds(), r)
			}
		}
	}
}

const upgradeRequest = "GET /ws HTTP/1.1\r\nHost: bench\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

// openTunnel dials addr and upgrades; the returned reader holds what
// followed the 101.
func openTunnel(addr string) (net.Conn, *bufio.Reader, error) { return openTunnelPath(addr, "/ws") }

func openTunnelPath(addr, path string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, strings.Replace(upgradeRequest, "/ws", path, 1)); err != nil {
		c.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(c, 512)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	c.SetDeadline(time.Time{})
	return c, br, nil
}

// frame is a masked 26-byte text message: 6 header bytes and 26 payload
// bytes, 32 on the wire.
var frame = func() []byte {
	payload := []byte("abcdefghijklmnopqrstuvwxyz")
	f := []byte{0x81, 0x80 | byte(len(payload)), 1, 2, 3, 4}
	for i, b := range payload {
		f = append(f, b^f[2+i%4])
	}
	return f
}()

// echo runs c tunnels for d (or m round trips each when m > 0), each
// sending a frame and waiting for its echo, and prints the round trips
// made. With m all tunnels are open before the first frame goes, so the
// proxy's work is the same from run to run.
func echo(addr string, c int, d time.Duration, m int) {
	var total atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	errs := make(chan error, c)
	start := make(chan struct{})
	for range c {
		conn, br, err := openTunnel(addr)
		if err != nil {
			fatal(err)
		}
		wg.Go(func() {
			defer conn.Close()
			got := make([]byte, len(frame))
			n := int64(0)
			<-start
			for (m > 0 && n < int64(m)) || (m <= 0 && time.Now().Before(stop)) {
				if _, err := conn.Write(frame); err != nil {
					errs <- err
					break
				}
				if _, err := io.ReadFull(br, got); err != nil {
					errs <- err
					break
				}
				n++
			}
			total.Add(n)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		fatal(err)
	}
	fmt.Println(total.Load())
}

// idle opens n tunnels and reports the RSS growth of pid per tunnel.
func idle(addr string, n, pid int) {
	if pid <= 0 {
		fatal(fmt.Errorf("-pid is required"))
	}
	warm, _, err := openTunnel(addr)
	if err != nil {
		fatal(fmt.Errorf("warm-up tunnel: %w", err))
	}
	warm.Close()
	time.Sleep(time.Second) // let the proxy finish the warm-up before the baseline
	before := rss(pid)
	var mu sync.Mutex // guards open and failed
	var open []net.Conn
	failed := 0
	next := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for range 100 {
		wg.Go(func() {
			for range next {
				c, _, err := openTunnel(addr)
				mu.Lock()
				if err != nil {
					failed++
				} else {
					open = append(open, c)
				}
				mu.Unlock()
			}
		})
	}
	for range n {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	took := time.Since(start)
	time.Sleep(time.Second)
	after := rss(pid)
	for _, c := range open {
		c.Close()
	}
	per := float64(after-before) / float64(max(len(open), 1))
	fmt.Printf("%d %d %.1f %d %d %.0f\n", len(open), failed, took.Seconds(), before, after, per)
}

// rss reads VmRSS of pid in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				fatal(err)
			}
			return kb * 1024
		}
	}
	fatal(fmt.Errorf("no VmRSS for %d", pid))
	return 0
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "wsbench:", err)
	os.Exit(1)
}
