package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bytes is an amount of memory or disk in bytes. In a config it is a
// number of bytes or a string with a unit: "512MiB", "2GiB", "1.5g" (the
// units are powers of 1024 whether or not they say "i": k, m, g, t with
// an optional "i" and "b", any case, as Docker and Kubernetes users write
// them). Zero means none given.
type Bytes int64

// Binary units.
const (
	KiB Bytes = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
)

// ErrBytes is wrapped by every error of ParseBytes.
var ErrBytes = errors.New("not an amount of bytes")

// ParseBytes reads an amount of bytes as a config writes it.
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("%w: %q (write a number of bytes, or one with a unit: 512MiB, 2GiB)", ErrBytes, s)
	}
	unit = strings.TrimSuffix(unit, "b")
	unit = strings.TrimSuffix(unit, "i")
	mult := map[string]float64{"": 1, "k": float64(KiB), "m": float64(MiB), "g": float64(GiB), "t": float64(TiB)}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("%w: %q has an unknown unit (use KiB, MiB, GiB or TiB)", ErrBytes, s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrBytes, s)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%w: %q is too large", ErrBytes, s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("%w: %q is not a whole number of bytes", ErrBytes, s)
	}
	return Bytes(v), nil
}

// String writes b in the largest unit that divides it ("512MiB", "1536KiB",
// "100B").
func (b Bytes) String() string {
	for _, u := range []struct {
		size Bytes
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if b != 0 && b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// UnmarshalText reads a YAML scalar: a plain number is bytes.
func (b *Bytes) UnmarshalText(text []byte) error {
	v, err := ParseBytes(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalText writes the form String gives.
func (b Bytes) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalJSON takes a number of bytes or a string with a unit.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	var n json.Number
	if err := json.Unmarshal(data, &n); err == nil {
		return b.UnmarshalText([]byte(n.String()))
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%w: %s", ErrBytes, data)
	}
	return b.UnmarshalText([]byte(s))
}

// MarshalJSON writes the form String gives, as a JSON string.
func (b Bytes) MarshalJSON() ([]byte, error) { return json.Marshal(b.String()) }
