// The idleconns command: open idle keep-alive connections and report the gateway's RSS growth.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "", "gateway address, host:port on loopback")
	count := flag.Int("n", 10000, "idle connections to open")
	pid := flag.Int("pid", 0, "gateway process id whose /proc entry is read")
	path := flag.String("path", "/", "request path of the single GET on each connection")
	parallel := flag.Int("concurrency", 200, "connections being opened at once")
	settle := flag.Duration("settle", time.Second, "wait before each RSS reading")
	deadline := flag.Duration("deadline", 40*time.Second, "bound on the whole run")
	flag.Parse()
	if *addr == "" || *pid <= 0 || *count <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	host, _, err := net.SplitHostPort(*addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fatal(fmt.Errorf("-addr %q must be a loopback host:port", *addr))
	}

	ctx, cancel := context.WithTimeout(context.Background(), *deadline)
	defer cancel()
	request := []byte("GET " + *path + " HTTP/1.1\r\nHost: " + *addr + "\r\nUser-Agent: idleconns\r\n\r\n")

	warm, err := openIdle(ctx, *addr, request)
	if err != nil {
		fatal(fmt.Errorf("warm-up request: %w", err))
	}
	warm.Close()
	time.Sleep(*settle) // let the gateway finish the warm-up's work before the baseline
	before := readProc(*pid)

	start := time.Now()
	conns, failures, firstErr := openMany(ctx, *addr, request, *count, *parallel)
	opened := time.Since(start)
	time.Sleep(*settle) // let buffers and goroutines of the last connections settle
	after := readProc(*pid)

	for _, c := range conns {
		c.Close()
	}
	time.Sleep(*settle) // let the gateway notice the closes before the last reading
	closed := readProc(*pid)

	fmt.Printf("| figure | value |\n|---|---|\n")
	fmt.Printf("| idle connections opened | %d of %d in %.1f s |\n", len(conns), *count, opened.Seconds())
	fmt.Printf("| gateway RSS before | %s |\n", mib(before.rss))
	fmt.Printf("| gateway RSS with connections open | %s |\n", mib(after.rss))
	fmt.Printf("| gateway RSS after closing them | %s |\n", mib(closed.rss))
	fmt.Printf("| gateway open fds before / open / closed | %d / %d / %d |\n", before.fds, after.fds, closed.fds)
	if len(conns) > 0 {
		per := float64(after.rss-before.rss) / float64(len(conns))
		fmt.Printf("| RSS per idle connection | %.0f bytes (%.2f KiB) |\n", per, per/1024)
	}
	if failures > 0 {
		fmt.Fprintf(os.Stderr, "idleconns: %d of %d connections failed; first error: %v\n", failures, *count, firstErr)
		os.Exit(1)
	}
}

// procFigures is one reading of a process's /proc entry.
type procFigures struct {
	rss int64 // VmRSS in bytes
	fds int   // entries in /proc/PID/fd
}

// readProc reads the gateway's VmRSS and open descriptor count; it exits when
// the gateway is gone, because every later figure would be meaningless.
func readProc(pid int) procFigures {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		fatal(fmt.Errorf("gateway process: %w", err))
	}
	var f procFigures
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				fatal(fmt.Errorf("parse VmRSS %q: %w", rest, err))
			}
			f.rss = kb * 1024
		}
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		f.fds = len(fds)
	}
	return f
}

// openMany opens count idle connections with at most parallel dials in flight.
// It returns the connections that succeeded, the number that failed and the
// first failure.
func openMany(ctx context.Context, addr string, request []byte, count, parallel int) ([]net.Conn, int, error) {
	var (
		mu       sync.Mutex // guards conns, failures, firstErr
		conns    = make([]net.Conn, 0, count)
		failures int
		firstErr error
	)
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range max(1, parallel) {
		wg.Go(func() {
			for range next {
				c, err := openIdle(ctx, addr, request)
				mu.Lock()
				if err != nil {
					failures++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		})
	}
	for range count {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	return conns, failures, firstErr
}

// openIdle dials addr, sends one request, reads the whole response and
// returns the still-open connection with no deadline left on it.
func openIdle(ctx context.Context, addr string, request []byte) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := exchange(ctx, c, request); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// exchange writes request on c and reads one complete 200 response, within
// ten seconds or the run's deadline, whichever comes first.
func exchange(ctx context.Context, c net.Conn, request []byte) error {
	limit := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(limit) {
		limit = d
	}
	c.SetDeadline(limit)
	if _, err := c.Write(request); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 1024), nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if resp.Close {
		return errors.New("gateway closed the connection after the response")
	}
	return c.SetDeadline(time.Time{})
}

func mib(bytes int64) string {
	return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "idleconns:", err)
	os.Exit(1)
}
