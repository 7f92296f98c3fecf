//go:build !linux

// Elsewhere nothing is dialed on the loop (DialOnLoop is false), so these
// are never called.

package upstream

import (
	"errors"

	"golang.org/x/sys/unix"
)

func socketConnect(unix.Sockaddr) (int, error) { return -1, errors.ErrUnsupported }

func connectAgain(int, unix.Sockaddr) error { return errors.ErrUnsupported }

func peerClosed(int) bool { return false }

func resetOnClose(int) {}
