package engine

import (
	"strconv"
	"testing"
)

// appendPort writes what strconv would, for every port a Host can carry.
func TestAppendPort(t *testing.T) {
	for p := 0; p <= 65535; p++ {
		if got, want := string(appendPort([]byte("h:"), p)), "h:"+strconv.Itoa(p); got != want {
			t.Fatalf("appendPort(%d) = %q, want %q", p, got, want)
		}
	}
}
