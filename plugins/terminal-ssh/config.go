package terminalssh

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dshdev/dsh/config"
)

// Config configures the ssh backend: where the remote shell runs and how
// sends are bounded. Every session opens its own connection with these
// settings.
type Config struct {
	// Host is the SSH server's host name or IP address, without a port.
	// Required.
	Host string `json:"host"`
	// Port is the SSH server's TCP port.
	Port int `json:"port"`
	// User is the remote account the shell runs as. Required.
	User string `json:"user"`
	// IdentityFile is the path of the private key that authenticates the
	// user (OpenSSH, PKCS#1, PKCS#8 or SEC 1 format, without a passphrase).
	// A leading "~/" is the local home directory. Required.
	IdentityFile string `json:"identityFile"`
	// KnownHostsFile is the OpenSSH known_hosts file that lists the
	// server's host key. Host keys are always checked strictly: a host that
	// is not listed, or offers another key than the one listed, is refused.
	// A leading "~/" is the local home directory.
	KnownHostsFile string `json:"knownHostsFile"`
	// Workdir is the remote directory the shell starts in; empty means the
	// remote user's home directory, and a relative path is taken from
	// there.
	Workdir string `json:"workdir"`
	// SpawnCwd makes a spawn that names a working directory (the bash
	// tool names the agent's workspace on this machine) start the remote
	// shell there instead of in Workdir. Off by default, because a local
	// path rarely exists on another machine; turn it on when both share
	// the filesystem.
	SpawnCwd bool `json:"spawnCwd"`
	// KeepaliveSeconds is how often an idle connection is probed; a probe
	// that fails, or gets no reply within three intervals, means the
	// connection is dead and the session has exited. 0 disables probes.
	KeepaliveSeconds int `json:"keepaliveSeconds"`
	// ConnectTimeoutSeconds bounds connecting to the server: the TCP
	// connection, then the SSH handshake and authentication.
	ConnectTimeoutSeconds int `json:"connectTimeoutSeconds"`
	// TimeoutMs bounds one send (and the start of a session) when the send
	// does not set its own timeout.
	TimeoutMs int `json:"timeoutMs"`
	// IdleSilenceMs is how long a send waits without output before it
	// settles as inferred_idle. Over SSH nothing can prove that a program
	// waits for input, so this silence is the only sign of it.
	IdleSilenceMs int `json:"idleSilenceMs"`
}

// Defaults of the optional fields.
const (
	defaultPort           = 22
	defaultKnownHosts     = "~/.ssh/known_hosts"
	defaultKeepalive      = 15
	defaultConnectTimeout = 10
	defaultTimeoutMs      = 300000
	// defaultIdleSilenceMs is longer than the local shell backend's 3 s:
	// output crosses a network here, where a lost segment stalls the stream
	// for a retransmission timeout (1 s at first, then 2 s), and such a
	// pause must not pass for a program waiting for input. Five seconds
	// covers two retransmissions and still reports a waiting program while
	// the caller is attentive.
	defaultIdleSilenceMs = 5000
)

// Bounds on the numeric fields. Durations in milliseconds stop at 2^31 - 1
// (24.8 days): past that they are surely a mistake.
const (
	maxMillis  = 1<<31 - 1
	maxSeconds = maxMillis / 1000
)

// DefaultConfig returns the configuration a deployment starts from. Host,
// User and IdentityFile have no default.
func DefaultConfig() *Config {
	return &Config{
		Port:                  defaultPort,
		KnownHostsFile:        defaultKnownHosts,
		KeepaliveSeconds:      defaultKeepalive,
		ConnectTimeoutSeconds: defaultConnectTimeout,
		TimeoutMs:             defaultTimeoutMs,
		IdleSilenceMs:         defaultIdleSilenceMs,
	}
}

// DecodeConfig decodes a JSON config over DefaultConfig and validates it.
// Unknown fields are an error. Empty input, or null, means the defaults,
// which lack the required fields.
func DecodeConfig(raw json.RawMessage) (*Config, error) {
	cfg := DefaultConfig()
	if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cfg); err != nil {
			return nil, fmt.Errorf("terminal-ssh: config: %w", err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, errors.New("terminal-ssh: config: unexpected data after the JSON object")
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Validate reports the first invalid setting; missing required fields come
// first, all named in one message.
func (c *Config) Validate() error {
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"host", c.Host}, {"user", c.User}, {"identityFile", c.IdentityFile},
	} {
		if strings.TrimSpace(f.value) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return config.FieldErrorf(missing[0], "terminal-ssh: missing required setting(s): %s", strings.Join(missing, ", "))
	}
	if err := checkHost(c.Host); err != nil {
		return config.FieldErrorf("host", "terminal-ssh: host %q: %v", c.Host, err)
	}
	if strings.ContainsAny(c.User, "\x00\r\n") {
		return config.FieldErrorf("user", "terminal-ssh: user must not contain NUL or line breaks")
	}
	if c.Port < 1 || c.Port > 65535 {
		return config.FieldErrorf("port", "terminal-ssh: port must be between 1 and 65535 (got %d)", c.Port)
	}
	if c.KnownHostsFile == "" {
		return config.FieldErrorf("knownHostsFile", "terminal-ssh: knownHostsFile must not be empty: host keys are always checked")
	}
	if strings.IndexByte(c.Workdir, 0) >= 0 {
		return config.FieldErrorf("workdir", "terminal-ssh: workdir must not contain a NUL byte")
	}
	for _, f := range []struct {
		name       string
		value, min int
		max        int
	}{
		{"keepaliveSeconds", c.KeepaliveSeconds, 0, maxSeconds},
		{"connectTimeoutSeconds", c.ConnectTimeoutSeconds, 1, maxSeconds},
		{"timeoutMs", c.TimeoutMs, 1, maxMillis},
		{"idleSilenceMs", c.IdleSilenceMs, 1, maxMillis},
	} {
		if f.value < f.min || f.value > f.max {
			return config.FieldErrorf(f.name, "terminal-ssh: %s must be between %d and %d (got %d)", f.name, f.min, f.max, f.value)
		}
	}
	return nil
}

// checkHost accepts a host name or an IP address (IPv6 without brackets).
func checkHost(h string) error {
	switch {
	case strings.ContainsAny(h, " \t\r\n\x00/@"):
		return errors.New("must be a bare host name or IP address")
	case net.ParseIP(h) != nil:
		return nil
	case strings.Contains(h, ":"):
		return errors.New("must not include a port; set port instead")
	}
	return nil
}

// addr is the server's address for dialing and for known_hosts.
func (c *Config) addr() string { return net.JoinHostPort(c.Host, fmt.Sprint(c.Port)) }

func (c *Config) connectTimeout() time.Duration {
	return time.Duration(c.ConnectTimeoutSeconds) * time.Second
}

// expandHome resolves a leading "~/" against the local home directory.
func expandHome(path string) (string, error) {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", path, err)
	}
	return filepath.Join(home, strings.TrimPrefix(path, "~")), nil
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }
