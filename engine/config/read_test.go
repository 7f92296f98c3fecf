// Tests for reading the config file: a file caught mid-write is read
// again, one that never holds still is refused, and so is an empty one.

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A first read that catches half the file does not count: the reads go on
// until two in a row agree, so what is parsed is the whole file. The pause
// hook is the writer, finishing the file between reads.
func TestReadSettledRereadsAFileCaughtMidWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopgate.yaml")
	full := []byte(sampleYAML)
	half := full[:strings.Index(sampleYAML, "routes:")]
	write(t, path, half)
	pauses := 0
	data, err := readSettled(path, func() {
		if pauses++; pauses == 1 {
			write(t, path, full)
		}
	})
	if err != nil || string(data) != sampleYAML {
		t.Fatalf("readSettled after the writer finished: %q, %v", data, err)
	}
	if pauses < 2 {
		t.Errorf("%d pauses: the whole file was taken without a read to confirm it", pauses)
	}
}

// A file that changes between every two reads is refused, with advice.
func TestReadSettledRefusesAFileThatKeepsChanging(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopgate.yaml")
	write(t, path, []byte(sampleYAML))
	n := 0
	_, err := readSettled(path, func() {
		n++
		write(t, path, []byte(sampleYAML+strings.Repeat("#", n)+"\n"))
	})
	if err == nil || !strings.Contains(err.Error(), "changed while it was read") || !strings.Contains(err.Error(), "rename") {
		t.Fatalf("readSettled on a file that keeps changing: %v", err)
	}
	if n != settleReads-1 {
		t.Errorf("%d pauses, want %d", n, settleReads-1)
	}
}

// A file that sets nothing would serve the default ports with no routes:
// Load refuses it, saying so. Parse keeps taking an empty document as the
// defaults (the embedded config and tests build on it).
func TestLoadRefusesAnEmptyFile(t *testing.T) {
	for _, text := range []string{"", "\n\n", "# nothing yet\n", "---\n", "{}\n", "~\n"} {
		path := filepath.Join(t.TempDir(), "loopgate.yaml")
		write(t, path, []byte(text))
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), "sets nothing") || !strings.Contains(err.Error(), "127.0.0.1:8080 with no routes") {
			t.Errorf("Load(%q) = %v, want it refused", text, err)
		}
		if _, err := Parse([]byte(text)); err != nil {
			t.Errorf("Parse(%q) = %v", text, err)
		}
	}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
