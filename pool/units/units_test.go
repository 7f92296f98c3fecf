// Tests for the unit types' parsing and formatting.

package units

import (
	"testing"
	"time"
)

func TestByteSize(t *testing.T) {
	good := map[string]ByteSize{
		"0": 0, "4096": 4096, "512B": 512, "8KiB": 8192, "16 KiB": 16384,
		"10MiB": 10 << 20, "1GiB": 1 << 30,
	}
	for text, want := range good {
		if got, err := ParseByteSize(text); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", text, got, err, want)
		}
	}
	for _, text := range []string{"", "KiB", "1.5MiB", "-1KiB", "10MB", "10 mib", "9999999999999GiB"} {
		if _, err := ParseByteSize(text); err == nil {
			t.Errorf("ParseByteSize(%q) succeeded, want an error", text)
		}
	}
	for size, want := range map[ByteSize]string{0: "0B", 1000: "1000B", 1024: "1KiB", 3 << 20: "3MiB", 1<<20 + 1: "1048577B"} {
		if got := size.String(); got != want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(size), got, want)
		}
	}
}

func TestDurationString(t *testing.T) {
	for d, want := range map[Duration]string{
		Duration(time.Minute): "1m", Duration(2 * time.Hour): "2h",
		Duration(90 * time.Second): "1m30s", Duration(500 * time.Millisecond): "500ms", 0: "0s",
	} {
		if got := d.String(); got != want {
			t.Errorf("Duration(%d).String() = %q, want %q", int64(d), got, want)
		}
	}
}
