//go:build !linux

// Pausing a tunnel's reads needs the loop's epoll descriptor (see
// tunnel_pause_linux.go); elsewhere tunnels never pause and a side that
// outruns its peer past overflowAt ends the tunnel.

package engine

import "github.com/panjf2000/gnet/v2"

func loopPoller(*loop) int { return -1 }

func pauseReads(int, gnet.Conn) bool { return false }

func resumeReads(int, gnet.Conn) {}
