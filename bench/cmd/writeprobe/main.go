// The writeprobe command: one config API write, timed from its first byte
// until the data plane serves it.
//
// It GETs -probe on one kept-alive connection, a poll a millisecond, from
// just before it sends the write (-method, -url, -body) until the answer's
// -header is -want (or, with -want "", until the header is gone: a deleted
// route's path falls to another route). The data plane takes a version
// before the write's answer is sent (what the apply does after it, such as
// the metrics registry's update, does not hold requests back), so the
// probe sees it before the answer arrives, or as it does. It prints one
// line of figures:
//
//	answered_ms=12.3 serving_ms=10.1 cpu_ms=9.8 polls=4 failed=0
//
// answered_ms is until the write's answer, serving_ms until the first probe
// answer showing the write; cpu_ms is the CPU the gateway (-pid) used until
// both, summed over its threads from /proc/PID/task/*/schedstat (in
// nanoseconds, where /proc/PID/stat counts 10 ms ticks); failed counts
// probe answers other than 200. A write answered other than 2xx exits 1.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	method := flag.String("method", "PUT", "the write's method")
	url := flag.String("url", "", "the write's URL, on the admin port")
	body := flag.String("body", "", "the write's JSON body")
	probe := flag.String("probe", "", "the URL on the gateway that shows the write")
	header := flag.String("header", "X-Route", "the response header that shows the write")
	want := flag.String("want", "", "the header's value once the write serves; \"\": until it is gone")
	pid := flag.Int("pid", 0, "the gateway's pid, for its CPU time")
	timeout := flag.Duration("timeout", 30*time.Second, "give up after this long")
	flag.Parse()

	client := &http.Client{Timeout: *timeout}
	cpu0 := threadsCPU(*pid)
	start := time.Now()
	type polled struct {
		at            time.Duration
		polls, failed int
	}
	probed := make(chan polled, 1)
	go func() {
		var p polled
		for {
			p.polls++
			resp, err := client.Get(*probe)
			if err != nil {
				fail(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				p.failed++
			} else if resp.Header.Get(*header) == *want {
				p.at = time.Since(start)
				probed <- p
				return
			}
			if time.Since(start) > *timeout {
				fail(fmt.Errorf("%s did not show the write within %s", *probe, *timeout))
			}
			// A poll a millisecond: a loop without a pause would take a
			// core of this 2-core machine from the gateway it is timing.
			time.Sleep(time.Millisecond)
		}
	}()
	req, err := http.NewRequest(*method, *url, strings.NewReader(*body))
	if err != nil {
		fail(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Loopgate-Admin", "1")
	resp, err := client.Do(req)
	if err != nil {
		fail(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	answered := time.Since(start)
	if resp.StatusCode/100 != 2 {
		fail(fmt.Errorf("%s %s answered %d: %s", *method, *url, resp.StatusCode, answer))
	}
	p := <-probed
	cpu := threadsCPU(*pid) - cpu0
	fmt.Printf("answered_ms=%.1f serving_ms=%.1f cpu_ms=%.1f polls=%d failed=%d\n",
		ms(answered), ms(p.at), ms(cpu), p.polls, p.failed)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// threadsCPU is the CPU time of pid's threads that are alive, from the first
// field of each one's schedstat (nanoseconds on a CPU); 0 without a pid.
func threadsCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		if field, _, ok := strings.Cut(string(data), " "); ok {
			n, _ := strconv.ParseInt(field, 10, 64)
			total += time.Duration(n)
		}
	}
	return total
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "writeprobe:", err)
	os.Exit(1)
}
