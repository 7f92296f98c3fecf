// Dial (other systems): every dial goes off the loop.

//go:build !linux

package upstream

import "errors"

// dialTarget is empty here: Pool.dial dials on a goroutine.
type dialTarget struct{}

func newDialTarget(string) dialTarget { return dialTarget{} }

func (dialTarget) ok() bool { return false }

func (dialTarget) connect() (int, bool, error) { return -1, false, errors.ErrUnsupported }

var errConnectPending = errors.New("upstream: connect in progress")

func connectDone(int) error { return errors.ErrUnsupported }
