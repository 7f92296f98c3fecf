//go:build !linux

// Pausing a tunnel's reads needs the loop's epoll descriptor (see
// tunnel_pause_linux.go); elsewhere tunnels never pause and a side that
// outruns its peer past overflowAt ends the tunnel, and a side with output
// queued when it half-closes closes the tunnel instead.

package engine

import "github.com/panjf2000/gnet/v2"

func loopPoller(*loop) int { return -1 }

func pauseReads(int, gnet.Conn) bool { return false }

func resumeReads(int, gnet.Conn) {}

// takeOutbound cannot reach gnet's queue here: a side with output queued
// at its FIN is not kept half open.
func takeOutbound(gc gnet.Conn, dst []byte) ([]byte, bool) { return dst, gc.OutboundBuffered() == 0 }
