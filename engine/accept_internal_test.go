package engine

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/config"
)

// gnet.Run returns nil however its loops end; Run reports loops that
// stopped without a Shutdown as an error, so the process exits non-zero.
func TestRunFailsWhenLoopsStopUnasked(t *testing.T) {
	cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 2\nroutes: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run() }()
	select {
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-srv.Ready():
	}
	// What a failing loop does in gnet: the engine stops itself.
	if err := srv.eng.Load().Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "stopped without a shutdown") {
			t.Fatalf("Run after the loops stopped unasked: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestAcceptBackoff(t *testing.T) {
	var got []time.Duration
	for d := time.Duration(0); len(got) < 8; {
		d = nextAcceptRetry(d)
		got = append(got, d)
	}
	want := []time.Duration{10, 20, 40, 80, 160, 320, 500, 500}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("back-off %v, want %v ms", got, want)
		}
	}
	for err, want := range map[syscall.Errno]acceptReason{
		syscall.EMFILE: acceptEMFILE, syscall.ENFILE: acceptENFILE, syscall.ENOBUFS: acceptENOBUFS,
		syscall.ENOMEM: acceptENOBUFS, syscall.ECONNABORTED: acceptAborted, syscall.EBADF: acceptOther,
	} {
		if r := classifyAccept(err); r != want {
			t.Errorf("%v: %v, want %v", err, r, want)
		}
	}
}
