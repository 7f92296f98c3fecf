package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

type options struct {
	addr, sni, path string
	conns           int
	duration        time.Duration
	rate            int
	hsRate          int
	resume          bool
	cfg             *tls.Config
}

func main() {
	var o options
	mode := flag.String("mode", "handshake", "handshake or latency")
	flag.StringVar(&o.addr, "addr", "", "server address, loopback host:port")
	flag.StringVar(&o.sni, "sni", "bench.test", "server name sent (SNI) and Host header")
	flag.StringVar(&o.path, "path", "/", "request path")
	flag.IntVar(&o.conns, "c", 16, "workers (handshake) or keep-alive connections (latency)")
	flag.DurationVar(&o.duration, "d", 10*time.Second, "duration")
	flag.IntVar(&o.rate, "rate", 2000, "latency: requests a second over all connections")
	flag.IntVar(&o.hsRate, "hsrate", 0, "handshake: at most this many connections a second over all workers; 0 = as fast as they go")
	flag.BoolVar(&o.resume, "resume", false, "handshake: resume sessions from a per-worker cache")
	version := flag.String("tls", "1.3", "TLS version: 1.2 or 1.3")
	curves := flag.String("curves", "classic", "key exchanges offered: classic (X25519, P-256, P-384, as OpenSSL 3.0 clients such as curl), or default (Go's, X25519MLKEM768 first)")
	flag.Parse()
	host, _, err := net.SplitHostPort(o.addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() || o.conns <= 0 || o.rate <= 0 || o.hsRate < 0 {
		flag.Usage()
		os.Exit(2)
	}
	o.cfg = &tls.Config{ServerName: o.sni, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}
	switch *version {
	case "1.2":
		o.cfg.MinVersion, o.cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	case "1.3":
		o.cfg.MinVersion, o.cfg.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
	default:
		fatal(fmt.Errorf("-tls %q: want 1.2 or 1.3", *version))
	}
	switch *curves {
	case "classic":
		// P-256 too: in TLS 1.2 an ECDSA P-256 certificate needs the
		// client to list the curve (OpenSSL refuses the handshake else).
		o.cfg.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256, tls.CurveP384}
	case "default":
	default:
		fatal(fmt.Errorf("-curves %q: want classic or default", *curves))
	}
	switch *mode {
	case "handshake":
		handshakes(o)
	case "latency":
		latency(o)
	default:
		fatal(fmt.Errorf("-mode %q: want handshake or latency", *mode))
	}
}

// result counts one mode's outcomes.
type result struct {
	ok, resumed, errors atomic.Int64
	firstErr            atomic.Value
}

func (r *result) fail(err error) {
	r.errors.Add(1)
	r.firstErr.CompareAndSwap(nil, err.Error())
}

func (r *result) report() string {
	if e := r.firstErr.Load(); e != nil {
		return fmt.Sprintf(" first_error=%q", e)
	}
	return ""
}

func handshakes(o options) {
	var r result
	var wg sync.WaitGroup
	stop := time.Now().Add(o.duration)
	start := time.Now()
	// With -hsrate, a worker takes a token before each connection; tokens
	// not taken when the next is due are dropped, so a stall is not made
	// up with a burst.
	var tokens chan struct{}
	if o.hsRate > 0 {
		tokens = make(chan struct{}, 1)
		tick := time.NewTicker(time.Second / time.Duration(o.hsRate))
		defer tick.Stop()
		go func() {
			for range tick.C {
				select {
				case tokens <- struct{}{}:
				default:
				}
			}
		}()
	}
	for range o.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := o.cfg.Clone()
			if o.resume {
				cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			}
			for time.Now().Before(stop) {
				if tokens != nil {
					select {
					case <-tokens:
					case <-time.After(time.Until(stop)):
						return
					}
				}
				resumed, err := once(o, cfg)
				if err != nil {
					r.fail(err)
					continue
				}
				r.ok.Add(1)
				if resumed {
					r.resumed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	fmt.Printf("handshakes=%d resumed=%d errors=%d seconds=%.2f rate=%.0f%s\n",
		r.ok.Load(), r.resumed.Load(), r.errors.Load(), secs, float64(r.ok.Load())/secs, r.report())
	if r.ok.Load() == 0 {
		os.Exit(1)
	}
}

// once makes one connection: handshake, one request, its response.
func once(o options, cfg *tls.Config) (resumed bool, err error) {
	raw, err := net.DialTimeout("tcp", o.addr, 5*time.Second)
	if err != nil {
		return false, err
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	c := tls.Client(raw, cfg)
	if err := c.Handshake(); err != nil {
		return false, err
	}
	if _, err := io.WriteString(c, "GET "+o.path+" HTTP/1.1\r\nHost: "+o.sni+"\r\nConnection: close\r\n\r\n"); err != nil {
		return false, err
	}
	if err := readResponse(bufio.NewReader(c)); err != nil {
		return false, err
	}
	return c.ConnectionState().DidResume, nil
}

func readResponse(br *bufio.Reader) error {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}

func latency(o options) {
	var r result
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	interval := time.Duration(int64(time.Second) * int64(o.conns) / int64(o.rate))
	start := time.Now()
	stop := start.Add(o.duration)
	for i := range o.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread the connections' schedules over one interval.
			next := start.Add(interval * time.Duration(i) / time.Duration(o.conns))
			lat, err := keepAlive(o, next, interval, stop)
			if err != nil {
				r.fail(err)
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(all)
	q := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))]) / 1e6
	}
	fmt.Printf("requests=%d errors=%d p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f%s\n",
		len(all), r.errors.Load(), q(0.50), q(0.99), q(0.999), q(1), r.report())
	if len(all) == 0 {
		os.Exit(1)
	}
}

// keepAlive sends a request on one connection at each scheduled time
// until stop, and returns each one's latency from its scheduled time.
func keepAlive(o options, next time.Time, interval time.Duration, stop time.Time) ([]time.Duration, error) {
	raw, err := net.DialTimeout("tcp", o.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	c := tls.Client(raw, o.cfg)
	if err := c.Handshake(); err != nil {
		return nil, err
	}
	br := bufio.NewReader(c)
	req := []byte("GET " + o.path + " HTTP/1.1\r\nHost: " + o.sni + "\r\n\r\n")
	var lat []time.Duration
	for ; next.Before(stop); next = next.Add(interval) {
		time.Sleep(time.Until(next))
		_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(req); err != nil {
			return lat, err
		}
		if err := readResponse(br); err != nil {
			return lat, err
		}
		lat = append(lat, time.Since(next))
	}
	if len(lat) == 0 {
		return nil, errors.New("no request sent")
	}
	return lat, nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "tlsload:", err)
	os.Exit(1)
}
