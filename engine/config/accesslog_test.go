// The access_log and metrics sections: defaults, accepted forms, and what
// is refused, with the line.

package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestObservabilitySections(t *testing.T) {
	c := mustParse(t, "")
	if c.AccessLog.On() || c.AccessLog.RingSize != 4096 || !c.Metrics.RecordsRequests() {
		t.Fatalf("defaults: %+v %+v", c.AccessLog, c.Metrics)
	}
	path := filepath.Join(t.TempDir(), "access.log")
	c = mustParse(t, "access_log: {path: "+path+", ring_size: 100}\nmetrics: {per_request: false}\n")
	if !c.AccessLog.On() || c.AccessLog.Path != path || c.AccessLog.RingSize != 100 || c.Metrics.RecordsRequests() {
		t.Fatalf("parsed: %+v %+v", c.AccessLog, c.Metrics)
	}
	if c.ErrorLog != (ErrorLog{Path: Stderr, Level: LevelInfo}) || c.AccessLog.FormatFields() != nil {
		t.Fatalf("error_log default %+v, format fields %q", c.ErrorLog, c.AccessLog.FormatFields())
	}
	c = mustParse(t, "access_log: {format: \"$time  $request_id\\t$status\"}\nerror_log: {path: stdout, level: warn}\n")
	if got := strings.Join(c.AccessLog.FormatFields(), ","); got != "time,request_id,status" || c.ErrorLog.Level != LevelWarn || c.ErrorLog.Path != Stdout {
		t.Fatalf("format fields %q, error_log %+v", got, c.ErrorLog)
	}
	for _, p := range []string{Stdout, Stderr} {
		if c := mustParse(t, "access_log: {path: "+p+"}\n"); c.AccessLog.Path != p {
			t.Errorf("path %s read as %q", p, c.AccessLog.Path)
		}
	}

	for _, tc := range []struct{ yaml, want string }{
		{"access_log: {path: /no/such/dir/access.log}\n", "line 1: access_log.path: stat /no/such/dir"},
		{"access_log:\n  ring_size: -1\n", "line 2: access_log.ring_size: must be positive"},
		{"access_log: {ring_size: 2000000}\n", "access_log.ring_size: 2000000 is over the most, 1048576"},
		{"metrics: {per_request: yes}\n", "per_request"},
		{"access_log: {file: x}\n", "file"},
		{"access_log: {format: \"$time status\"}\n", `access_log.format: "status" is not a $variable`},
		{"access_log: {format: \"$time $nope\"}\n", `access_log.format: unknown field "$nope"`},
		{"access_log: {format: \"$time $time\"}\n", `access_log.format: "$time" appears twice`},
		{"error_log: {level: verbose}\n", `error_log.level: "verbose" is not one of debug, info, warn, error`},
		{"error_log: {path: /no/such/dir/error.log}\n", "error_log.path: stat /no/such/dir"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}
