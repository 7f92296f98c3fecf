// Tests and benchmarks for the buffer lifecycle and leak detection.

package pool_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/pool/pooltest"
)

func TestMain(m *testing.M) { pooltest.Main(m) }

func TestGetRoundsUpToSizeClass(t *testing.T) {
	cases := []struct{ size, wantCap int }{
		{0, 512}, {1, 512}, {512, 512}, {513, 1024}, {4096, 4096},
		{5000, 8192}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1},
	}
	for _, c := range cases {
		b := pool.Get(c.size)
		if len(b.B) != 0 || cap(b.B) != c.wantCap || b.Refs() != 1 {
			t.Errorf("Get(%d): len %d cap %d refs %d; want len 0 cap %d refs 1",
				c.size, len(b.B), cap(b.B), b.Refs(), c.wantCap)
		}
		b.Release()
	}
	pooltest.CheckNoLeaks(t)
}

func TestGetReleaseCycleReturnsCleanBuffers(t *testing.T) {
	for i := range 1000 {
		b := pool.Get(700)
		if len(b.B) != 0 || cap(b.B) < 700 {
			t.Fatalf("cycle %d: len %d cap %d", i, len(b.B), cap(b.B))
		}
		b.B = append(b.B, "dirty"...)
		b.Release()
	}
	pooltest.CheckNoLeaks(t)
}

func TestRetainReleaseCounts(t *testing.T) {
	b := pool.Get(64)
	b.Retain()
	b.Retain()
	if got := b.Refs(); got != 3 {
		t.Fatalf("after two Retains: refs %d, want 3", got)
	}
	b.Release()
	b.Release()
	if got := b.Refs(); got != 1 {
		t.Fatalf("after two Releases: refs %d, want 1", got)
	}
	if len(pool.Leaks()) != 1 {
		t.Fatalf("a buffer with one reference left must still be tracked")
	}
	b.Release()
	if got := b.Refs(); got != 0 {
		t.Fatalf("after last Release: refs %d, want 0", got)
	}
	pooltest.CheckNoLeaks(t)
}

func TestConcurrentRetainRelease(t *testing.T) {
	b := pool.Get(64)
	var wg sync.WaitGroup
	for range 8 {
		b.Retain() // the goroutine's reference, taken before it starts
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				b.Retain()
				b.Release()
			}
			b.Release()
		}()
	}
	wg.Wait()
	if got := b.Refs(); got != 1 {
		t.Fatalf("refs %d after goroutines finished, want 1", got)
	}
	b.Release()
	pooltest.CheckNoLeaks(t)
}

func TestDoubleReleasePanicsUnderDetection(t *testing.T) {
	b := pool.Get(64)
	b.Release()
	mustPanic(t, "second Release", b.Release)
	mustPanic(t, "Retain after release", b.Retain)
}

func TestDoubleReleaseCountedWithoutDetection(t *testing.T) {
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)

	before := pool.DoubleReleases()
	b := pool.Get(64)
	b.Release()
	b.Release() // must neither panic nor corrupt the pool
	if got := pool.DoubleReleases() - before; got != 1 {
		t.Fatalf("DoubleReleases grew by %d, want 1", got)
	}
	mustPanic(t, "Retain after release", b.Retain)
}

func TestSafeRelease(t *testing.T) {
	var nilBuf *pool.Buffer
	nilBuf.SafeRelease() // must not panic

	b := pool.Get(64)
	b.Retain()
	b.Retain()
	b.SafeRelease()
	if got := b.Refs(); got != 0 {
		t.Fatalf("refs %d after SafeRelease, want 0", got)
	}
	b.SafeRelease() // already released: no-op, no panic
	pooltest.CheckNoLeaks(t)
}

func TestGrowPreservesContents(t *testing.T) {
	b := pool.Get(16)
	same := b
	want := []byte{}
	for i := 0; len(want) < 3<<20; i++ {
		chunk := bytes.Repeat([]byte{byte(i)}, 1000+i)
		b.Grow(len(chunk))
		if cap(b.B)-len(b.B) < len(chunk) {
			t.Fatalf("Grow(%d) left only %d bytes free", len(chunk), cap(b.B)-len(b.B))
		}
		before := cap(b.B)
		b.B = append(b.B, chunk...)
		if cap(b.B) != before {
			t.Fatalf("append after Grow reallocated")
		}
		want = append(want, chunk...)
	}
	if b != same {
		t.Fatalf("Grow replaced the *Buffer")
	}
	if !bytes.Equal(b.B, want) {
		t.Fatalf("content changed across Grow")
	}
	b.Grow(0) // no-op
	b.Release()
	pooltest.CheckNoLeaks(t)
}

func TestBufferOutgrownByAppendIsReleasable(t *testing.T) {
	b := pool.Get(512)
	b.B = append(b.B, make([]byte, 3000)...) // append reallocates past the class
	b.Release()
	b = pool.Get(512)
	if cap(b.B) < 512 || len(b.B) != 0 {
		t.Fatalf("pool handed out a bad buffer: len %d cap %d", len(b.B), cap(b.B))
	}
	b.Release()
	pooltest.CheckNoLeaks(t)
}

func TestLeakReportNamesGetCaller(t *testing.T) {
	_, file, line, _ := runtime.Caller(0)
	small, big := pool.Get(100), pool.Get(2<<20) // line+1: both tracked here
	site := fmt.Sprintf("%s:%d", file, line+1)

	leaks := pool.Leaks()
	if len(leaks) != 2 {
		t.Fatalf("Leaks() = %d entries, want 2: %+v", len(leaks), leaks)
	}
	for i, wantSize := range []int{100, 2 << 20} {
		if leaks[i].Size != wantSize || !strings.HasPrefix(leaks[i].Site, site+" ") {
			t.Errorf("leak %d = {%d, %q}; want size %d, site starting %q", i, leaks[i].Size, leaks[i].Site, wantSize, site)
		}
		if !strings.Contains(leaks[i].Site, "TestLeakReportNamesGetCaller") {
			t.Errorf("leak %d site lacks the function name: %q", i, leaks[i].Site)
		}
	}

	rec := &recordingTB{TB: t}
	pooltest.CheckNoLeaks(rec)
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], site) {
		t.Errorf("CheckNoLeaks reported %q, want one error naming %s", rec.errors, site)
	}

	small.Release()
	big.Release()
	pooltest.CheckNoLeaks(t)
}

// TestMainExitsNonZeroOnLeak runs this test binary again with a test that
// leaks, and checks pooltest.Main reports the site and fails the run.
func TestMainExitsNonZeroOnLeak(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeakingChild$")
	cmd.Env = append(os.Environ(), "POOL_LEAKING_CHILD=1")
	out, err := cmd.CombinedOutput()
	exitErr, ok := err.(*exec.ExitError)
	if !ok || exitErr.ExitCode() != 1 {
		t.Fatalf("child exited with %v, want exit status 1; output:\n%s", err, out)
	}
	for _, want := range []string{"1 buffer(s) not released", "4000 bytes", "buffer_test.go:", "TestLeakingChild"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}

func TestLeakingChild(t *testing.T) {
	if os.Getenv("POOL_LEAKING_CHILD") != "1" {
		t.Skip("only runs as the child of TestMainExitsNonZeroOnLeak")
	}
	pool.Get(4000) // deliberately never released
}

// recordingTB captures Error calls instead of failing the test.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper()           {}
func (r *recordingTB) Error(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }
func (r *recordingTB) Errorf(f string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(f, args...))
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func BenchmarkGetRelease(b *testing.B) {
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	b.ReportAllocs()
	for b.Loop() {
		buf := pool.Get(4096)
		buf.B = append(buf.B, 'x')
		buf.Release()
	}
}

func BenchmarkGetReleaseParallel(b *testing.B) {
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			buf := pool.Get(4096)
			buf.B = append(buf.B, 'x')
			buf.Release()
		}
	})
}

func BenchmarkRetainRelease(b *testing.B) {
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	b.ReportAllocs()
	buf := pool.Get(4096)
	for b.Loop() {
		buf.Retain()
		buf.Release()
	}
	buf.Release()
}
