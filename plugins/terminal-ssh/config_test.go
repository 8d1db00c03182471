package terminalssh

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dshdev/dsh/config"
)

func TestDecodeConfig(t *testing.T) {
	const base = `"host": "example.org", "user": "agent", "identityFile": "~/.ssh/id_dsh"`
	for _, tc := range []struct {
		name  string
		raw   string
		field string // the FieldError's field; "" for a decoding error
		msg   string // the error mentions it; "" means valid
	}{
		{"empty", ``, "host", "host, user, identityFile"},
		{"null", `null`, "host", "host, user, identityFile"},
		{"object", `{}`, "host", "host, user, identityFile"},
		{"only host", `{"host": "h"}`, "user", "user, identityFile"},
		{"valid", `{` + base + `}`, "", ""},
		{"unknown field", `{` + base + `, "hots": "x"}`, "", `"hots"`},
		{"wrong type", `{` + base + `, "port": "22"}`, "", "port"},
		{"trailing data", `{` + base + `} {}`, "", "after the JSON object"},
		{"port zero", `{` + base + `, "port": 0}`, "port", "between 1 and 65535"},
		{"port too big", `{` + base + `, "port": 70000}`, "port", "between 1 and 65535"},
		{"host with port", `{"host": "example.org:22", "user": "u", "identityFile": "k"}`, "host", "set port instead"},
		{"host with user", `{"host": "me@example.org", "user": "u", "identityFile": "k"}`, "host", "bare host name"},
		{"ipv6 host", `{"host": "::1", "user": "u", "identityFile": "k"}`, "", ""},
		{"no known_hosts", `{` + base + `, "knownHostsFile": ""}`, "knownHostsFile", "always checked"},
		{"negative keepalive", `{` + base + `, "keepaliveSeconds": -1}`, "keepaliveSeconds", "between 0"},
		{"keepalive off", `{` + base + `, "keepaliveSeconds": 0}`, "", ""},
		{"zero connect timeout", `{` + base + `, "connectTimeoutSeconds": 0}`, "connectTimeoutSeconds", "between 1"},
		{"zero timeout", `{` + base + `, "timeoutMs": 0}`, "timeoutMs", "between 1"},
		{"huge silence", `{` + base + `, "idleSilenceMs": 9999999999}`, "idleSilenceMs", "between 1"},
		{"NUL in workdir", `{` + base + `, "workdir": "a\u0000b"}`, "workdir", "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := DecodeConfig(json.RawMessage(tc.raw))
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("DecodeConfig(%s): %v", tc.raw, err)
				}
				if cfg.Port != 22 || cfg.KnownHostsFile != "~/.ssh/known_hosts" || cfg.TimeoutMs != 300000 {
					t.Fatalf("defaults not applied: %+v", cfg)
				}
				return
			}
			if err == nil {
				t.Fatalf("DecodeConfig(%s) succeeded", tc.raw)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q", err, tc.msg)
			}
			fe, isField := errors.AsType[*config.FieldError](err)
			switch {
			case tc.field == "" && isField:
				t.Errorf("error %q names field %q, want a decoding error", err, fe.Field)
			case tc.field != "" && (!isField || fe.Field != tc.field):
				t.Errorf("error %q: want a FieldError for %q", err, tc.field)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	want := Config{Port: 22, KnownHostsFile: "~/.ssh/known_hosts", KeepaliveSeconds: 15, ConnectTimeoutSeconds: 10, TimeoutMs: 300000, IdleSilenceMs: 5000}
	if *cfg != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", *cfg, want)
	}
	if DefaultConfig() == cfg {
		t.Fatal("DefaultConfig returns a shared value")
	}
}
