// One route written through the Control at 30,000 routes: the whole path
// of an admin API write (document edit, diff, parse, compile, state file,
// apply) against a real engine.Server that is not serving.

package admin

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/confstore"
)

// scaleConfig is n exact-path routes /r0 ... to one upstream.
func scaleConfig(n int) []byte {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nupstreams:\n  - {name: backend, nodes: [\"127.0.0.1:9\"]}\nroutes:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: r%d, path: /r%d, upstream: backend}\n", i, i)
	}
	return []byte(b.String())
}

// serverEngine is the command's engineControl, without the descriptor
// warning.
type serverEngine struct{ srv *engine.Server }

func (e serverEngine) Prepare(cfg *config.Config) (func() error, error) {
	c, err := e.srv.Compile(cfg)
	if err != nil {
		return nil, err
	}
	return func() error { _, err := e.srv.Apply(c); return err }, nil
}

func (e serverEngine) Reload(cfg *config.Config, allowEmpty bool) (string, error) {
	return e.srv.ReloadWith(cfg, engine.ReloadOptions{AllowEmpty: allowEmpty})
}

// scaleControl is a Control over a Server of n routes, with a state file.
func scaleControl(tb testing.TB, n int) *Control {
	tb.Helper()
	c, cfg, err := NewControl(ControlOptions{Parse: config.Parse, ParseWithRoutes: config.ParseWithRoutes, StatePath: filepath.Join(tb.TempDir(), "state.json")}, scaleConfig(n))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Flush) // a reload's save may still write into TempDir
	srv, err := engine.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	c.Bind(serverEngine{srv}, nil)
	return c
}

// BenchmarkApplyOneRouteAt30k is PUT /config/routes/r7 at 30,000 routes,
// the route's path changing on every write.
func BenchmarkApplyOneRouteAt30k(b *testing.B) {
	c := scaleControl(b, 30000)
	b.ReportAllocs()
	b.ResetTimer()
	t0 := processCPU()
	for i := 0; i < b.N; i++ {
		moveR7(b, c, i)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
	b.ReportMetric(float64(processCPU()-t0)/1e6/float64(b.N), "cpu-ms/op")
}

// moveR7 is the write of BenchmarkApplyOneRouteAt30k: PUT
// /config/routes/r7 with the path /moved/i.
func moveR7(b testing.TB, c *Control, i int) {
	body := map[string]any{"id": "r7", "path": fmt.Sprintf("/moved/%d", i), "upstream": "backend"}
	if _, err := c.change(writer{action: "PUT /config/routes/r7"}, func(d confstore.Doc) error {
		confstore.Set(d, confstore.Routes, "r7", body)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkApplyTwoRoutesApartAt30k is one write of two routes far apart
// at 30,000 routes (as a rollback or loopgate config apply makes): r7's
// and r29000's paths change on every write, so every id between them is
// read for the splice.
func BenchmarkApplyTwoRoutesApartAt30k(b *testing.B) {
	c := scaleControl(b, 30000)
	b.ReportAllocs()
	b.ResetTimer()
	t0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := c.change(writer{action: "PUT /config"}, func(d confstore.Doc) error {
			for _, id := range []string{"r7", "r29000"} {
				confstore.Set(d, confstore.Routes, id, map[string]any{"id": id, "path": fmt.Sprintf("/moved/%s/%d", id, i), "upstream": "backend"})
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-t0)/1e6/float64(b.N), "cpu-ms/op")
}

// BenchmarkCreateDeleteAt30k is POST /config/routes of a new route at
// 30,000 routes, then DELETE of it: two writes an op, the route appended
// and then removed from the end.
func BenchmarkCreateDeleteAt30k(b *testing.B) {
	c := scaleControl(b, 30000)
	b.ReportAllocs()
	b.ResetTimer()
	t0 := processCPU()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprint("w", i)
		for _, v := range []any{map[string]any{"id": id, "path": "/w/" + id, "upstream": "backend"}, nil} {
			if _, err := c.change(writer{action: "POST /config/routes"}, func(d confstore.Doc) error {
				confstore.Set(d, confstore.Routes, id, v)
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(processCPU()-t0)/1e6/float64(b.N), "cpu-ms/op")
}

// BenchmarkDeleteMiddleAt30k is DELETE /config/routes/r<k> at 30,000
// routes, k from 1,000 up: a route in the middle of the list, every route
// after it one place up.
func BenchmarkDeleteMiddleAt30k(b *testing.B) {
	c := scaleControl(b, 30000)
	b.ReportAllocs()
	b.ResetTimer()
	t0 := processCPU()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprint("r", 1000+i)
		if _, err := c.change(writer{action: "DELETE /config/routes/" + id}, func(d confstore.Doc) error {
			confstore.Set(d, confstore.Routes, id, nil)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-t0)/1e6/float64(b.N), "cpu-ms/op")
}

// BenchmarkApplyAfterEveryRouteChangedAt30k is BenchmarkApplyOneRouteAt30k
// once a file reload that changed every route is among the kept versions:
// the state file then holds that version's 30,000 changes, and every write
// saves it again.
func BenchmarkApplyAfterEveryRouteChangedAt30k(b *testing.B) {
	c := scaleControl(b, 30000)
	every := []byte(strings.ReplaceAll(string(scaleConfig(30000)), "path: /r", "path: /v"))
	c.opts.Read = func() ([]byte, error) { return every, nil }
	if _, err := c.Reload("bench", ReloadOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	t0 := processCPU()
	for i := 0; i < b.N; i++ {
		moveR7(b, c, i)
	}
	b.ReportMetric(float64(processCPU()-t0)/1e6/float64(b.N), "cpu-ms/op")
}

// BenchmarkFileReloadAt30k is a reload of a 30,000-route config file
// through the Control, as SIGHUP or POST /reload runs it (without the
// debounce window and the settle reads), after one API write: the file
// unchanged, and one route's path changing on every reload. took-ms/op is
// the reload's own time (Result.Took); cpu-ms/op includes the state
// file's save, which runs after it.
func BenchmarkFileReloadAt30k(b *testing.B) {
	for _, bc := range []struct {
		name string
		edit func(data []byte, i int) []byte
	}{
		{"unchanged", func(data []byte, _ int) []byte { return data }},
		{"one-route", func(data []byte, i int) []byte {
			return []byte(strings.Replace(string(data), "path: /r5,", fmt.Sprintf("path: /r5x%d,", i), 1))
		}},
		{"every-route", func(data []byte, i int) []byte {
			return []byte(strings.ReplaceAll(string(data), "path: /r", fmt.Sprintf("path: /v%d-", i)))
		}},
		// Every route but the last, as make bench-scale's file has a
		// prefix route after them that keeps its place and text.
		{"all-but-one", func(data []byte, i int) []byte {
			text := string(data)
			last := strings.LastIndex(text, "  - {id: ")
			return []byte(strings.ReplaceAll(text[:last], "path: /r", fmt.Sprintf("path: /v%d-", i)) + text[last:])
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			data := scaleConfig(30000)
			c := scaleControl(b, 30000)
			if _, err := c.change(writer{action: "PUT /config/routes/r7"}, func(d confstore.Doc) error {
				confstore.Set(d, confstore.Routes, "r7", map[string]any{"id": "r7", "path": "/moved", "upstream": "backend"})
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			var next []byte
			c.opts.Read = func() ([]byte, error) { return next, nil }
			b.ReportAllocs()
			b.ResetTimer()
			var cpu, took time.Duration
			for i := 0; i < b.N; i++ {
				next = bc.edit(data, i)
				t0, w0 := processCPU(), time.Now()
				if _, err := c.Reload("bench", ReloadOptions{}); err != nil {
					b.Fatal(err)
				}
				took += time.Since(w0)
				c.Flush() // the state file's save, after the reload: in its CPU, not in its time
				cpu += processCPU() - t0
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "took-ms/op")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkHeapAt30k is the heap a gateway of 30,000 routes holds (the
// Control's documents and config, the engine's compiled snapshot and
// durable state), per route, after a collection: no request has reached
// any route. For a profile: -memprofile with -memprofilerate 1.
func BenchmarkHeapAt30k(b *testing.B) {
	var perRoute float64
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := scaleControl(b, 30000)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(c)
		perRoute = float64(after.HeapInuse-before.HeapInuse) / 30000
	}
	b.ReportMetric(perRoute, "B/route")
}

// BenchmarkWriteHeapAt30k is what API writes at 30,000 routes leave in
// memory: Keep writes (a full version history) of one route each, the
// route's path changing every time, then the heap in use after a
// collection against before them (retained-B/write: the spans in use; the
// survivors of writes no collection ran between sit in more of them) and
// the live bytes (live-B/write: what the versions and the new config
// keep), the bytes the writes allocated (alloc-B/write: what
// the collector holds until it runs, and what RSS rises by meanwhile),
// the collections they caused (gc/write) and the CPU the process used per
// write (getrusage: user and system, the
// collector's included; steadier than the wall clock on a shared machine).
func BenchmarkWriteHeapAt30k(b *testing.B) {
	var retained, live, allocated, cpu, gcs float64
	for i := 0; i < b.N; i++ {
		c := scaleControl(b, 30000)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		t0 := processCPU()
		for w := 0; w < confstore.Keep; w++ {
			body := map[string]any{"id": "r7", "path": fmt.Sprintf("/moved/%d", w), "upstream": "backend"}
			if _, err := c.change(writer{action: "PUT /config/routes/r7"}, func(d confstore.Doc) error {
				confstore.Set(d, confstore.Routes, "r7", body)
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		cpu = float64(processCPU()-t0) / float64(confstore.Keep)
		runtime.ReadMemStats(&after)
		allocated = float64(after.TotalAlloc-before.TotalAlloc) / float64(confstore.Keep)
		gcs = float64(after.NumGC-before.NumGC) / float64(confstore.Keep)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(c)
		retained = (float64(after.HeapInuse) - float64(before.HeapInuse)) / float64(confstore.Keep)
		live = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(confstore.Keep)
	}
	b.ReportMetric(retained, "retained-B/write")
	b.ReportMetric(live, "live-B/write")
	b.ReportMetric(allocated, "alloc-B/write")
	b.ReportMetric(cpu/1e6, "cpu-ms/write")
	b.ReportMetric(gcs, "gc/write")
}

// processCPU is the CPU time the process has used, user and system, all
// threads (the collector's included): on a shared machine it moves far
// less with the load than the wall clock does.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
