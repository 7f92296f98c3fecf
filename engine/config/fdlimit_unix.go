//go:build unix

package config

import "syscall"

// descriptorLimit is the process's RLIMIT_NOFILE soft limit; 0 when it
// cannot be read or is unlimited.
func descriptorLimit() uint64 {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil || lim.Cur == ^uint64(0) {
		return 0
	}
	return uint64(lim.Cur)
}
