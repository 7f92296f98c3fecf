// Command freeport prints TCP ports on 127.0.0.1 that the kernel reports as
// free, one per line, so benchmark scripts never hard-code a port.
//
// Usage:
//
//	freeport [-n COUNT]
//
// All COUNT listeners are held open together before any is closed, so the
// printed ports are distinct. A port can still be taken by another process
// between this program exiting and the caller binding it; benchmark scripts
// accept that small race.
package main
