//go:build !linux

// CPU pinning is Linux-only; elsewhere -pin only locks OS threads.

package engine

func pinThread(int) error { return nil }
