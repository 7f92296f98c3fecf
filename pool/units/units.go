// Package units holds the two value types every config section writes its
// numbers with, in YAML and in Go: Duration ("500ms", "1s") and ByteSize
// (4096, "16KiB"). The gateway's own config (engine/config) and each
// filter's config (filters/...) share them, so a timeout or a size is
// written and checked the same way everywhere.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written in YAML as a Go duration string:
// "500ms", "1s", "1m30s". A bare number is an error, since its unit would
// be a guess; only 0 needs none.
type Duration time.Duration

// String formats d like time.Duration, but whole minutes and hours
// without trailing zero units ("1m", not "1m0s").
func (d Duration) String() string {
	td := time.Duration(d)
	switch {
	case td != 0 && td%time.Hour == 0:
		return strconv.FormatInt(int64(td/time.Hour), 10) + "h"
	case td != 0 && td%time.Minute == 0:
		return strconv.FormatInt(int64(td/time.Minute), 10) + "m"
	}
	return td.String()
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration such as \"500ms\" or \"1s\"")
	}
	v, err := time.ParseDuration(n.Value)
	if _, numErr := strconv.ParseFloat(n.Value, 64); err != nil && numErr == nil {
		return fmt.Errorf("invalid duration %s: a unit is needed, such as \"%ss\" or \"%sms\"", n.Value, n.Value, n.Value)
	}
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a number with a unit, such as \"500ms\", \"1s\" or \"2m\"", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// ByteSize is a size in bytes. In YAML it is an integer (bytes) or a string
// with a binary unit: "512B", "8KiB", "10MiB", "1GiB". Decimal units (KB,
// MB) are rejected rather than guessed at.
type ByteSize int64

var byteUnits = []struct {
	suffix string
	size   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// String formats s with the largest binary unit that divides it exactly.
func (s ByteSize) String() string {
	for _, u := range byteUnits {
		if s != 0 && int64(s)%u.size == 0 {
			return strconv.FormatInt(int64(s)/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (s *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a size such as 4096 or \"16KiB\"")
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (s ByteSize) MarshalYAML() (any, error) { return s.String(), nil }

// ParseByteSize accepts an integer optionally followed by B, KiB, MiB or GiB.
func ParseByteSize(text string) (ByteSize, error) {
	bad := fmt.Errorf("invalid size %q: want bytes (4096) or a number with a unit B, KiB, MiB or GiB (\"16KiB\")", text)
	s := strings.TrimSpace(text)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ByteSize(n), nil
	}
	for _, u := range byteUnits {
		digits, found := strings.CutSuffix(s, u.suffix)
		if !found {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(digits), 10, 64)
		if err != nil || n < 0 {
			return 0, bad
		}
		if n > math.MaxInt64/u.size {
			return 0, fmt.Errorf("invalid size %q: too large", text)
		}
		return ByteSize(n * u.size), nil
	}
	return 0, bad
}
