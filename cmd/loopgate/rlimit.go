// The descriptor limit: raised at start, and read for max_connections.

package main

import "syscall"

// raiseDescriptorLimit raises the soft RLIMIT_NOFILE to the hard limit,
// as Go's runtime does at start since Go 1.19 and nginx's
// worker_rlimit_nofile does: a proxy holds two descriptors per request,
// and soft limits of 1024 are common. It returns the soft limit now in
// force; 0 if it cannot be read or is unlimited.
func raiseDescriptorLimit() uint64 {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	if lim.Cur == ^uint64(0) {
		return 0
	}
	return uint64(lim.Cur)
}
