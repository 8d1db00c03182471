package terminalssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Connecting fails precisely, with nothing left behind: the host key is
// checked strictly, the identity must be authorized, the host must answer.
func TestSpawnErrors(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	otherKey, err := writeKey(filepath.Join(dir, "other_host_key"))
	if err != nil {
		t.Fatal(err)
	}
	// Another server's entry only: this one is unknown.
	unknown := write("unknown_hosts", knownhosts.Line([]string{"[127.0.0.1]:1"}, shared.hostKey)+"\n")
	// This server listed with another key: it changed.
	changed := write("changed_hosts", knownhosts.Line([]string{shared.addr()}, otherKey)+"\n")
	// Hashed like `ssh-keygen -H` writes it, with the right key: trusted.
	hashed := write("hashed_hosts", knownhosts.Line([]string{knownhosts.HashHostname(knownhosts.Normalize(shared.addr()))}, shared.hostKey)+"\n")
	empty := write("empty_hosts", "")
	stranger := filepath.Join(dir, "stranger_key")
	if _, err := writeKey(stranger); err != nil {
		t.Fatal(err)
	}
	closedPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		want    []error // all must match
		notWant error
		mention []string // the message names these
	}{
		{"trusted hashed entry", func(c *Config) { c.KnownHostsFile = hashed }, nil, nil, nil},
		{"unknown host key", func(c *Config) { c.KnownHostsFile = unknown }, []error{ErrUnknownHostKey}, ErrHostKeyChanged, []string{shared.addr(), unknown, "ssh-ed25519"}},
		{"empty known_hosts", func(c *Config) { c.KnownHostsFile = empty }, []error{ErrUnknownHostKey}, ErrHostKeyChanged, []string{empty}},
		{"changed host key", func(c *Config) { c.KnownHostsFile = changed }, []error{ErrUnknownHostKey, ErrHostKeyChanged}, nil, []string{shared.addr(), changed + ":1", "man-in-the-middle"}},
		{"unauthorized key", func(c *Config) { c.IdentityFile = stranger }, []error{ErrAuthFailed}, ErrUnknownHostKey, []string{stranger}},
		{"unknown user", func(c *Config) { c.User = "no-such-user-dsh" }, []error{ErrAuthFailed}, nil, []string{"no-such-user-dsh"}},
		{"nobody listening", func(c *Config) { c.Port = closedPort }, []error{ErrUnreachable}, nil, []string{"127.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			tc.edit(cfg)
			b := newBackend(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			s, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-err"})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("spawn: %v", err)
				}
				if err := s.Close(ctx, "test"); err != nil {
					t.Fatal(err)
				}
				return
			}
			if s != nil {
				s.Close(ctx, "test")
				t.Fatal("spawn succeeded")
			}
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("spawn = %v, want %v", err, want)
				}
			}
			if tc.notWant != nil && errors.Is(err, tc.notWant) {
				t.Errorf("spawn = %v, should not match %v", err, tc.notWant)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("spawn error %q does not mention %q", err, m)
				}
			}
		})
	}
}

// A server that accepts the connection but never speaks fails the
// handshake at the connect timeout, or at once when the spawn's context
// ends.
func TestSpawnSilentServer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	cfg := testConfig()
	cfg.Port = l.Addr().(*net.TCPAddr).Port
	cfg.ConnectTimeoutSeconds = 1
	b := newBackend(t, cfg)

	_, err = b.Spawn(context.Background(), termapi.SpawnSpec{SessionID: "pty-silent"})
	if !errors.Is(err, ErrHandshake) {
		t.Fatalf("spawn against a silent server = %v, want %v", err, ErrHandshake)
	}
	(<-accepted).Close()

	cfg.ConnectTimeoutSeconds = 600
	b = newBackend(t, cfg)
	cause := errors.New("the caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-silent"})
		done <- err
	}()
	conn := <-accepted
	defer conn.Close()
	cancel(cause)
	if err := <-done; !errors.Is(err, cause) {
		t.Fatalf("spawn whose context ended = %v, want %v", err, cause)
	}
}

// Bad files are reported by New, before any connection.
func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	garbage := write("garbage", []byte("not a key\n"))
	block, err := ssh.MarshalPrivateKeyWithPassphrase(mustEd25519(t), "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	locked := write("locked_key", pem.EncodeToMemory(block))
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		want    error
		mention string
	}{
		{"missing identity", func(c *Config) { c.IdentityFile = filepath.Join(dir, "nope") }, ErrIdentity, "nope"},
		{"garbage identity", func(c *Config) { c.IdentityFile = garbage }, ErrIdentity, garbage},
		{"identity with a passphrase", func(c *Config) { c.IdentityFile = locked }, ErrIdentity, "passphrase"},
		{"missing known_hosts", func(c *Config) { c.KnownHostsFile = filepath.Join(dir, "nope_hosts") }, ErrKnownHosts, "nope_hosts"},
		{"garbage known_hosts", func(c *Config) { c.KnownHostsFile = garbage }, ErrKnownHosts, garbage},
		{"invalid config", func(c *Config) { c.Port = 0 }, nil, "port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			tc.edit(cfg)
			b, err := New(cfg)
			if err == nil {
				b.Close(context.Background())
				t.Fatal("New succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("New = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("New error %q does not mention %q", err, tc.mention)
			}
		})
	}
}

func mustEd25519(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}
