// gnetLogger: gnet's log output, reduced to what an operator should see.

package engine

import (
	"log"

	"github.com/panjf2000/gnet/v2/pkg/logging"
)

// gnetLogger drops gnet's debug and info lines (one per engine start) and
// passes warnings and errors to the standard logger.
type gnetLogger struct{}

var _ logging.Logger = gnetLogger{}

func (gnetLogger) Debugf(string, ...any)             {}
func (gnetLogger) Infof(string, ...any)              {}
func (gnetLogger) Warnf(format string, args ...any)  { log.Printf("gnet: warning: "+format, args...) }
func (gnetLogger) Errorf(format string, args ...any) { log.Printf("gnet: error: "+format, args...) }
func (gnetLogger) Fatalf(format string, args ...any) { log.Fatalf("gnet: fatal: "+format, args...) }
