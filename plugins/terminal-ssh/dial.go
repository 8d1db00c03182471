package terminalssh

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// credentials are what a connection authenticates with. They are read for
// every connection, so a rotated key or a host added to known_hosts takes
// effect without a restart; New reads them once to report a bad file early.
type credentials struct {
	identity   string // the identity file's path
	signer     ssh.Signer
	knownHosts string // the known_hosts file's path
	check      ssh.HostKeyCallback
}

func loadCredentials(cfg *Config) (*credentials, error) {
	id, err := expandHome(cfg.IdentityFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIdentity, err)
	}
	pem, err := os.ReadFile(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIdentity, err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if _, ok := errors.AsType[*ssh.PassphraseMissingError](err); ok {
		return nil, fmt.Errorf("%w: %s is protected by a passphrase, which nobody is there to type; use a key without one", ErrIdentity, id)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrIdentity, id, err)
	}
	kh, err := expandHome(cfg.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKnownHosts, err)
	}
	check, err := knownhosts.New(kh)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKnownHosts, err)
	}
	return &credentials{identity: id, signer: signer, knownHosts: kh, check: check}, nil
}

// probeKey is a key no host has. Checking it against known_hosts lists the
// keys the file has for a host (a mismatch reports them), which is the only
// way the knownhosts package tells them.
var probeKey, _ = ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))

// hostKeyAlgorithms are the host key algorithms to negotiate with addr:
// those of the keys known_hosts lists for it, so that a server with several
// host keys presents the one that can be checked. Nil (the library's
// default order) when none is listed, e.g. for a host trusted through a
// certificate authority.
func (c *credentials) hostKeyAlgorithms(addr string) []string {
	err := c.check(addr, &net.TCPAddr{IP: net.IPv4zero}, probeKey)
	keyErr, ok := errors.AsType[*knownhosts.KeyError](err)
	if !ok {
		return nil
	}
	var algs []string
	seen := map[string]bool{}
	for _, k := range keyErr.Want {
		names := []string{k.Key.Type()}
		if names[0] == ssh.KeyAlgoRSA {
			// An RSA key signs with SHA-2 first; plain ssh-rsa (SHA-1) is last.
			names = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				algs = append(algs, n)
			}
		}
	}
	return algs
}

// handshakeState records what the handshake's callbacks saw, to tell why a
// handshake failed. The callbacks run on the library's goroutines.
type handshakeState struct {
	mu        sync.Mutex
	hostErr   error
	hostOK    bool
	authTried bool
}

// dial connects to the server and authenticates, within the connect
// timeout and ctx. A failure is precise: ErrUnreachable, a host key error
// (ErrUnknownHostKey), ErrAuthFailed, ErrHandshake, or ctx's cause.
func dial(ctx context.Context, cfg *Config, cred *credentials) (*ssh.Client, error) {
	addr := cfg.addr()
	bound := cfg.connectTimeout()
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(cctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("terminal-ssh: connect to %s: %w", addr, context.Cause(ctx))
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, addr, err)
	}
	// The handshake takes no context: the deadline bounds it, and the
	// context's end closes the connection under it.
	deadline, _ := cctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(cctx, func() { conn.Close() })

	st := &handshakeState{}
	config := &ssh.ClientConfig{
		User: cfg.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			st.mu.Lock()
			st.authTried = true
			st.mu.Unlock()
			return []ssh.Signer{cred.signer}, nil
		})},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			err := cred.verifyHostKey(hostname, remote, key)
			st.mu.Lock()
			st.hostErr, st.hostOK = err, err == nil
			st.mu.Unlock()
			return err
		},
		HostKeyAlgorithms: cred.hostKeyAlgorithms(addr),
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, config)
	if !stop() && err == nil {
		// The context ended just as the handshake succeeded.
		c.Close()
		err = context.Cause(cctx)
	}
	if err != nil {
		conn.Close()
		st.mu.Lock()
		defer st.mu.Unlock()
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("terminal-ssh: connect to %s: %w", addr, context.Cause(ctx))
		case st.hostErr != nil:
			return nil, st.hostErr
		case cctx.Err() != nil:
			return nil, fmt.Errorf("%w: %s: no answer within %v", ErrHandshake, addr, bound)
		case st.hostOK && st.authTried:
			return nil, fmt.Errorf("%w: %s refused user %q with the key in %s (%s %s): %v",
				ErrAuthFailed, addr, cfg.User, cred.identity, cred.signer.PublicKey().Type(), ssh.FingerprintSHA256(cred.signer.PublicKey()), err)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrHandshake, addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// verifyHostKey checks key against known_hosts and explains a refusal.
func (c *credentials) verifyHostKey(hostname string, remote net.Addr, key ssh.PublicKey) error {
	err := c.check(hostname, remote, key)
	if err == nil {
		return nil
	}
	he := &hostKeyError{addr: hostname, file: c.knownHosts, key: key}
	if keyErr, ok := errors.AsType[*knownhosts.KeyError](err); ok {
		for _, k := range keyErr.Want {
			he.known = append(he.known, fmt.Sprintf("%s:%d", k.Filename, k.Line))
		}
		return he
	}
	if rev, ok := errors.AsType[*knownhosts.RevokedError](err); ok {
		he.revoked = fmt.Sprintf("%s:%d", rev.Revoked.Filename, rev.Revoked.Line)
		return he
	}
	// A certificate that fails its checks, or an address that cannot be
	// parsed: refused all the same.
	return fmt.Errorf("%w: %s: %v", ErrUnknownHostKey, hostname, err)
}
