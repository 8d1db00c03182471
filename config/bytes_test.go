package config

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Bytes
	}{
		{"0", 0},
		{"1073741824", GiB},
		{"512MiB", 512 * MiB},
		{"512mi", 512 * MiB},
		{"512M", 512 * MiB},
		{"512mb", 512 * MiB},
		{"2g", 2 * GiB},
		{"1.5GiB", 3 * GiB / 2},
		{" 64 KiB ", 64 * KiB},
		{"1TiB", TiB},
	} {
		got, err := ParseBytes(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "12 parsecs", "0.5", "1e3", "9999999TiB", "1.2.3"} {
		if got, err := ParseBytes(in); !errors.Is(err, ErrBytes) {
			t.Errorf("ParseBytes(%q) = %d, %v; want an error", in, got, err)
		}
	}
}

func TestBytesRoundTrip(t *testing.T) {
	for _, b := range []Bytes{512 * MiB, 3 * GiB / 2, 100, 4 * GiB, 1536 * KiB} {
		text, _ := b.MarshalText()
		var back Bytes
		if err := back.UnmarshalText(text); err != nil || back != b {
			t.Errorf("%d → %s → %d, %v", b, text, back, err)
		}
		js, _ := json.Marshal(b)
		if err := json.Unmarshal(js, &back); err != nil || back != b {
			t.Errorf("%d → %s → %d, %v", b, js, back, err)
		}
	}
	var b Bytes
	if err := json.Unmarshal([]byte(`268435456`), &b); err != nil || b != 256*MiB {
		t.Errorf("a JSON number: %d, %v", b, err)
	}
	if err := json.Unmarshal([]byte(`true`), &b); !errors.Is(err, ErrBytes) {
		t.Errorf("a JSON bool: %v", err)
	}
	if s := (1536 * MiB).String(); s != "1536MiB" {
		t.Errorf("String = %s", s)
	}
}
