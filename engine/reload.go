// Reload: compiling a new config off the loops and swapping it in.

package engine

import (
	"errors"

	"github.com/loopgate/loopgate/engine/config"
)

// Reload compiles cfg and, when it compiles and changes nothing that cannot
// change live, makes it the config every new request uses. It returns one
// line saying what changed, or an error saying why the reload was refused;
// a refused reload leaves the running config serving.
func (s *Server) Reload(cfg *config.Config) (string, error) {
	return "", errors.New("engine: reload is not implemented yet")
}
