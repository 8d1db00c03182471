//go:build linux

package terminalbash

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dshdev/dsh/config"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
		msg   string
	}{
		{"default", func(*Config) {}, "", ""},
		{"empty type", func(c *Config) { c.BackendType = "" }, "backendType", "terminal-bash: backendType must be non-empty"},
		{"zero rows", func(c *Config) { c.Rows = 0 }, "rows", "terminal-bash: rows must be a positive integer"},
		{"negative cols", func(c *Config) { c.Cols = -1 }, "cols", "terminal-bash: cols must be a positive integer"},
		{"huge rows", func(c *Config) { c.Rows = 70000 }, "rows", "terminal-bash: rows must not exceed 65535"},
		{"zero lines", func(c *Config) { c.ScrollbackLines = 0 }, "scrollbackLines", "terminal-bash: scrollbackLines must be a positive integer"},
		{"zero bytes", func(c *Config) { c.ScrollbackMaxBytes = 0 }, "scrollbackMaxBytes", "terminal-bash: scrollbackMaxBytes must be a positive integer"},
		{"zero read", func(c *Config) { c.MaxReadBytes = 0 }, "maxReadBytes", "terminal-bash: maxReadBytes must be a positive integer"},
		{"zero idle", func(c *Config) { c.IdleSilenceMs = 0 }, "idleSilenceMs", "terminal-bash: idleSilenceMs must be a positive integer"},
		{"zero timeout", func(c *Config) { c.TimeoutMs = 0 }, "timeoutMs", "terminal-bash: timeoutMs must be a positive integer"},
		{"zero grace", func(c *Config) { c.DisposeGraceMs = 0 }, "disposeGraceMs", "terminal-bash: disposeGraceMs must be a positive integer"},
		{"zero probe", func(c *Config) { c.StdinProbeMaxMs = 0 }, "stdinProbeMaxMs", "terminal-bash: stdinProbeMaxMs must be a positive integer"},
		{"huge timeout", func(c *Config) { c.TimeoutMs = 1 << 31 }, "timeoutMs", "terminal-bash: timeoutMs must not exceed 2147483647"},
		{"huge grace", func(c *Config) { c.DisposeGraceMs = 1 << 40 }, "disposeGraceMs", "terminal-bash: disposeGraceMs must not exceed 2147483647"},
		{"read over scrollback", func(c *Config) { c.MaxReadBytes = c.ScrollbackMaxBytes + 1 }, "maxReadBytes", "terminal-bash: maxReadBytes must not exceed scrollbackMaxBytes"},
		{"env inherit", func(c *Config) { c.Env.Inherit = "some" }, "env.inherit", `terminal-bash: env.inherit must be one of all, core, none; got "some"`},
		{"env bad glob", func(c *Config) { c.Env.Exclude = []string{"AWS_["} }, "env.exclude", `terminal-bash: env.exclude: "AWS_[" is not a valid glob`},
		{"env empty glob", func(c *Config) { c.Env.IncludeOnly = []string{""} }, "env.includeOnly", `terminal-bash: env.includeOnly: "" is not a valid glob`},
		{"env set protocol", func(c *Config) { c.Env.Set = map[string]string{"PROMPT_COMMAND": "x"} }, "env.set", "terminal-bash: env.set cannot set PROMPT_COMMAND: dsh sets it for the shell protocol"},
		{"env set own", func(c *Config) { c.Env.Set = map[string]string{"DSH_SHELL": "0"} }, "env.set", "terminal-bash: env.set cannot set DSH_SHELL: dsh sets it for the shell protocol"},
		{"env set name", func(c *Config) { c.Env.Set = map[string]string{"A=B": "x"} }, "env.set", `terminal-bash: env.set: "A=B" is not a variable name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.edit(cfg)
			err := cfg.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a *config.FieldError", err)
			}
			if fe.Field != tt.field || err.Error() != tt.msg {
				t.Errorf("Validate = %q on %q, want %q on %q", err, fe.Field, tt.msg, tt.field)
			}
		})
	}
}

func TestConfigShellDefaults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ShellPath, cfg.ShellArgs = "", nil
	path, args := cfg.shell()
	if path != "/bin/bash" || !slices.Equal(args, []string{"--noediting", "--noprofile", "--norc", "-i"}) {
		t.Errorf("empty shell settings give %s %q", path, args)
	}
	cfg.ShellPath, cfg.ShellArgs = "/usr/bin/env", []string{"bash", "-i"}
	path, args = cfg.shell()
	if path != "/usr/bin/env" || !slices.Equal(args, []string{"bash", "-i"}) {
		t.Errorf("explicit shell settings give %s %q", path, args)
	}
}

func TestConfigFromJSON(t *testing.T) {
	tests := []struct {
		raw     string
		wantErr string
		check   func(*Config) bool
	}{
		{raw: "", check: func(c *Config) bool { return c.Rows == 40 && c.BackendType == "shell" }},
		{raw: "{}", check: func(c *Config) bool { return c.Cols == 160 }},
		{raw: `{"rows": 24, "backendType": "remote"}`, check: func(c *Config) bool { return c.Rows == 24 && c.BackendType == "remote" && c.Cols == 160 }},
		{raw: `{"rows": 24, "colour": 1}`, wantErr: `unknown field "colour"`},
		{raw: `{"rows": "many"}`, wantErr: "rows"},
		{raw: `{"rows": 0}`, wantErr: "rows must be a positive integer"},
		{raw: `[1]`, wantErr: "config"},
	}
	for _, tt := range tests {
		cfg, err := ConfigFromJSON(json.RawMessage(tt.raw))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ConfigFromJSON(%s) = %v, want an error saying %q", tt.raw, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !tt.check(cfg) {
			t.Errorf("ConfigFromJSON(%s) = %+v, %v", tt.raw, cfg, err)
		}
	}
}
