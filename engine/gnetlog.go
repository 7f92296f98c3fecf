// gnetLogger: gnet's log output, reduced to what an operator should see.

package engine

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/loopgate/loopgate/engine/accesslog"
	"github.com/panjf2000/gnet/v2/pkg/logging"
)

// gnetLogger drops gnet's debug and info lines (one per engine start) and
// passes warnings and errors to the error log as notices of their level.
type gnetLogger struct{}

var _ logging.Logger = gnetLogger{}

func (gnetLogger) Debugf(string, ...any) {}
func (gnetLogger) Infof(string, ...any)  {}
func (gnetLogger) Warnf(format string, args ...any) {
	noticef(accesslog.LevelWarn, "gnet: "+format, args...)
}
func (gnetLogger) Errorf(format string, args ...any) {
	msg := fmt.Sprintf("gnet: "+format, args...)
	lastGnetErr.Store(&msg)
	noticef(accesslog.LevelError, "%s", msg)
}

// Fatalf writes its line before it exits: the queue would lose it.
func (gnetLogger) Fatalf(format string, args ...any) {
	noticef(accesslog.LevelError, "gnet: fatal: "+format, args...)
	SyncNotices()
	os.Exit(1)
}

// lastGnetErr is the last error gnet logged, for the error Run returns
// when the loops stop on their own.
var lastGnetErr atomic.Pointer[string]

func lastGnetError() string {
	if p := lastGnetErr.Load(); p != nil {
		return "last gnet error: " + *p
	}
	return "gnet logged no error"
}
