package terminalssh

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Errors that callers branch on. Messages wrap them with the server's
// address and the underlying cause.
var (
	// ErrUnreachable: the TCP connection to the server failed (no route,
	// refused, name not resolved, timed out).
	ErrUnreachable = errors.New("terminal-ssh: host unreachable")
	// ErrHandshake: the server was reached but the SSH handshake failed for
	// another reason than its host key or authentication.
	ErrHandshake = errors.New("terminal-ssh: SSH handshake failed")
	// ErrUnknownHostKey: the server's host key is not one the known_hosts
	// file trusts for it: the host is not listed, is listed with other keys
	// (also ErrHostKeyChanged), or its key is revoked.
	ErrUnknownHostKey = errors.New("terminal-ssh: host key is not trusted")
	// ErrHostKeyChanged: known_hosts lists other keys for the host than
	// the one it offered, which may be a man-in-the-middle. Such an error
	// matches ErrUnknownHostKey too.
	ErrHostKeyChanged = errors.New("terminal-ssh: host key has changed")
	// ErrAuthFailed: the server refused the identity.
	ErrAuthFailed = errors.New("terminal-ssh: authentication failed")
	// ErrIdentity: the identity file cannot be read or is not a usable
	// private key.
	ErrIdentity = errors.New("terminal-ssh: bad identity file")
	// ErrKnownHosts: the known_hosts file cannot be read or parsed.
	ErrKnownHosts = errors.New("terminal-ssh: bad known_hosts file")
	// ErrRemoteShell: connected and authenticated, but the remote shell
	// could not be started or did not reach its prompt.
	ErrRemoteShell = errors.New("terminal-ssh: remote shell did not start")
)

// hostKeyError is a host key the known_hosts file does not trust. It
// matches ErrUnknownHostKey, and ErrHostKeyChanged when other keys are
// listed for the host.
type hostKeyError struct {
	addr, file string
	key        ssh.PublicKey
	known      []string // "file:line" of the keys listed for the host
	revoked    string   // "file:line" of the revocation, if revoked
}

func (e *hostKeyError) Error() string {
	offered := e.key.Type() + " " + ssh.FingerprintSHA256(e.key)
	switch {
	case e.revoked != "":
		return fmt.Sprintf("%v: %s offered %s, which %s revokes", ErrUnknownHostKey, e.addr, offered, e.revoked)
	case len(e.known) > 0:
		return fmt.Sprintf("%v: %s offered %s, but %s lists other keys for it (%s): the host key has changed, which may be a man-in-the-middle; if the host was reinstalled, remove those lines and add the new key after checking its fingerprint",
			ErrUnknownHostKey, e.addr, offered, e.file, strings.Join(e.known, ", "))
	}
	return fmt.Sprintf("%v: %s offered %s, which %s does not list; add it (ssh-keyscan) after checking its fingerprint",
		ErrUnknownHostKey, e.addr, offered, e.file)
}

func (e *hostKeyError) Is(target error) bool {
	return target == ErrUnknownHostKey || (target == ErrHostKeyChanged && len(e.known) > 0 && e.revoked == "")
}
