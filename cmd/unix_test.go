//go:build linux

package dshcmd

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPeerListenerRefusesOtherUsers: a connection whose peer is not the
// expected user is closed before HTTP sees it.
func TestPeerListenerRefusesOtherUsers(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	raw, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, tt := range []struct {
		name   string
		uid    int
		accept bool
	}{
		{"same user", os.Getuid(), true},
		{"another user", os.Getuid() + 4242, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln := &peerListener{Listener: raw, uid: tt.uid, logger: slog.New(slog.DiscardHandler)}
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := ln.Accept()
				if err == nil {
					accepted <- c
				}
			}()
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tt.accept {
				(<-accepted).Close()
				return
			}
			// The refused connection is closed: a read sees EOF.
			buf := make([]byte, 1)
			if n, err := c.Read(buf); err == nil || n != 0 {
				t.Fatalf("read on a refused connection: %d, %v", n, err)
			}
			raw.(*net.UnixListener).Close() // ends the Accept loop
		})
	}
}

func TestListenUnixRefusesAnOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	if _, err := listenUnix(filepath.Join(dir, "s")); err == nil || !strings.Contains(err.Error(), "open to other users") {
		t.Fatalf("listenUnix in a 0755 directory: %v", err)
	}
	// A live server's socket is not taken over; a stale one is replaced.
	priv := filepath.Join(t.TempDir(), "priv")
	ln, err := listenUnix(filepath.Join(priv, "s"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listenUnix(filepath.Join(priv, "s")); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second listener on a live socket: %v", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	ln, err = listenUnix(filepath.Join(priv, "s"))
	if err != nil {
		t.Fatalf("replacing a stale socket: %v", err)
	}
	ln.Close()
}
