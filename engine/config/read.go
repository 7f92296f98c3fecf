// Reading the config file: until two reads agree, so a file caught while
// it is written is never applied half-written, and never an empty one.

package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"
)

// A file is read until two whole reads, settlePause apart, return the
// same bytes with the same size, modification time and inode, at most
// settleReads times. The pauses add up to 80 ms, within the reload
// debounce window (100 ms), so the reload a trigger started serves it
// whatever the file was doing when it began.
const (
	settleReads = 5
	settlePause = 20 * time.Millisecond
)

// Load reads and parses the YAML file at path (see Parse). A file that
// changes while it is read is read again until it holds still; one that
// never does within the budget above is refused, and so is a file that
// sets nothing at all (empty, or only comments), which would otherwise
// serve on the default ports with no routes.
func Load(path string) (*Config, error) {
	c, _, err := LoadSource(path)
	return c, err
}

// LoadSource is Load, also returning the bytes it parsed: the document
// the admin API's changes are laid over.
func LoadSource(path string) (*Config, []byte, error) {
	data, err := readSettled(path, func() { time.Sleep(settlePause) })
	if err != nil {
		return nil, nil, err
	}
	c, empty, err := parse(data)
	if err != nil {
		return nil, nil, err
	}
	if empty {
		return nil, nil, fmt.Errorf("config: %s sets nothing (it is empty or holds only comments): it would serve on %s with no routes, "+
			"every request a 404; refused", path, c.Listen)
	}
	return c, data, nil
}

// ReadSettled reads the file at path as Load does, until two reads agree,
// and returns its bytes without parsing them: a reload that parses only
// what changed since the last read (the admin Control) starts from it.
func ReadSettled(path string) ([]byte, error) {
	return readSettled(path, func() { time.Sleep(settlePause) })
}

// readSettled returns the contents of path once two whole reads in a row,
// with pause between them, agree (see settleReads). A read agrees with
// nothing when the file's size or modification time moved while it ran,
// or it returned another size than the file has.
func readSettled(path string, pause func()) ([]byte, error) {
	var prev []byte
	var prevInfo os.FileInfo
	for i := range settleReads {
		if i > 0 {
			pause()
		}
		data, info, whole, err := readOnce(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if !whole {
			prev = nil
			continue
		}
		if prev != nil && bytes.Equal(prev, data) && os.SameFile(prevInfo, info) &&
			prevInfo.ModTime().Equal(info.ModTime()) {
			return data, nil
		}
		prev, prevInfo = data, info
	}
	return nil, fmt.Errorf("config: %s changed while it was read (%d reads %s apart did not agree); refused: "+
		"write the new config to a temporary file and rename it into place", path, settleReads, settlePause)
}

// readOnce reads path whole. whole reports whether the file kept its size
// and modification time throughout, and the read returned that many bytes.
func readOnce(path string) (data []byte, info os.FileInfo, whole bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, false, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return nil, nil, false, err
	}
	if data, err = io.ReadAll(f); err != nil {
		return nil, nil, false, err
	}
	after, err := f.Stat()
	if err != nil {
		return nil, nil, false, err
	}
	whole = before.Size() == after.Size() && before.ModTime().Equal(after.ModTime()) && int64(len(data)) == after.Size()
	return data, after, whole, nil
}
