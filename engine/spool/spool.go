// Spool: an outbound byte queue that overflows from memory into a temp file.

package spool

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrFull is returned when the spool file would pass its size limit.
var ErrFull = errors.New("spool: temporary file limit reached")

// Conn is the part of gnet.Conn a Spool writes to.
type Conn interface {
	Write(p []byte) (int, error)
	OutboundBuffered() int
}

// Config bounds a spool.
type Config struct {
	HighWater int    // bytes gnet may buffer before the spool starts spilling
	MaxFile   int64  // largest temporary file
	Dir       string // where temporary files are created ("" = os.TempDir())
}

// Spool is one connection's overflow queue. The zero value is empty and
// ready; Reset must be called when the connection is done with it.
type Spool struct {
	file       *os.File
	wOff, rOff int64 // file offsets: written so far, handed to the conn so far
}

// Sent is how many spooled bytes have been handed back to the connection
// since the spool was last empty; it moves while the peer is reading.
func (s *Spool) Sent() int64 { return s.rOff }

// Pending reports whether bytes wait in the file.
func (s *Spool) Pending() bool { return s.wOff > s.rOff }

// Write queues p for c: straight to the connection while it is under the
// high-water mark and nothing waits in the file, else into the file so the
// order of bytes is kept.
func (s *Spool) Write(c Conn, p []byte, cfg *Config, scratch []byte) error {
	if s.Pending() {
		if err := s.Pump(c, cfg, scratch); err != nil {
			return err
		}
	}
	if !s.Pending() && c.OutboundBuffered() <= cfg.HighWater {
		_, err := c.Write(p)
		return err
	}
	return s.spill(p, cfg)
}

func (s *Spool) spill(p []byte, cfg *Config) error {
	if s.wOff+int64(len(p)) > cfg.MaxFile {
		return ErrFull
	}
	if s.file == nil {
		f, err := os.CreateTemp(cfg.Dir, "loopgate-spool-*")
		if err != nil {
			return fmt.Errorf("spool: %w", err)
		}
		// Unlinked at once: the space goes back to the disk when the file
		// is closed, even if the process dies.
		_ = os.Remove(f.Name())
		s.file = f
	}
	n, err := s.file.WriteAt(p, s.wOff)
	s.wOff += int64(n)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}

// Pump moves file bytes to c while c is under the high-water mark, using
// scratch as the read buffer. When the file is drained it is truncated for
// reuse.
func (s *Spool) Pump(c Conn, cfg *Config, scratch []byte) error {
	for s.Pending() && c.OutboundBuffered() <= cfg.HighWater {
		want := s.wOff - s.rOff
		if want > int64(len(scratch)) {
			want = int64(len(scratch))
		}
		n, err := s.file.ReadAt(scratch[:want], s.rOff)
		if n == 0 {
			// Bytes are pending but none can be read (the file is shorter
			// than what was written to it): an error, never a retry, or the
			// loop would spin here.
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("spool: %w", err)
		}
		s.rOff += int64(n)
		if _, err := c.Write(scratch[:n]); err != nil {
			return err
		}
	}
	if !s.Pending() && s.wOff > 0 {
		s.wOff, s.rOff = 0, 0
		_ = s.file.Truncate(0)
	}
	return nil
}

// Reset drops any queued bytes and closes the file.
func (s *Spool) Reset() {
	if s.file != nil {
		_ = s.file.Close()
		s.file = nil
	}
	s.wOff, s.rOff = 0, 0
}
