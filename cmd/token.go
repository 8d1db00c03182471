//go:build linux

package dshcmd

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dshdev/dsh/internal/mcpfront"
	"github.com/dshdev/dsh/internal/private"
)

// checkPrivateFile checks that path is a regular file of this user's that
// group and others cannot read: a file of secrets.
func checkPrivateFile(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	case !ok || int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s belongs to another user; refusing to trust it with a secret", path)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s is open to other users (mode %#o); make it 0600", path, fi.Mode().Perm())
	}
	return nil
}

// readTokenFile reads --token-file, which must be private to this user.
func readTokenFile(path string) (*mcpfront.Tokens, error) {
	if err := checkPrivateFile(path); err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	tokens, err := mcpfront.ReadTokens(f)
	if err != nil {
		return nil, fmt.Errorf("--token-file %s: %w", path, err)
	}
	return tokens, nil
}

// writeTokenFile writes a fresh token for the server at addr into the
// runtime directory, 0600, and returns the file's path. The file is
// created beside its final name and renamed over it, so no reader ever
// sees a partial token and a stale file of an earlier server is replaced
// whole.
func writeTokenFile(addr net.Addr, token string) (string, error) {
	dir, err := private.Dir()
	if err != nil {
		return "", fmt.Errorf("write the token: %w", err)
	}
	name := "http-" + strings.NewReplacer(":", "-", "[", "", "]", "").Replace(addr.String()) + ".token"
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return "", fmt.Errorf("write the token: %w", err)
	}
	_, werr := io.WriteString(tmp, token+"\n")
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write the token: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write the token: %w", err)
	}
	return path, nil
}

// clientSnippets are ready-to-paste client settings for a server at url
// whose token is in tokenFile.
func clientSnippets(url, tokenFile string) []string {
	return []string{
		fmt.Sprintf(`Claude Code: claude mcp add --transport http dsh %s --header "Authorization: Bearer $(cat %s)"`, url, tokenFile),
		fmt.Sprintf(`Codex: export DSH_TOKEN="$(cat %s)", and in ~/.codex/config.toml: [mcp_servers.dsh] url = "%s" bearer_token_env_var = "DSH_TOKEN"`, tokenFile, url),
		fmt.Sprintf(`Gemini CLI: export DSH_TOKEN="$(cat %s)", and in ~/.gemini/settings.json: {"mcpServers": {"dsh": {"httpUrl": "%s", "headers": {"Authorization": "Bearer $DSH_TOKEN"}}}}`, tokenFile, url),
		fmt.Sprintf(`Cursor: export DSH_TOKEN="$(cat %s)", and in .cursor/mcp.json: {"mcpServers": {"dsh": {"url": "%s", "headers": {"Authorization": "Bearer ${env:DSH_TOKEN}"}}}}`, tokenFile, url),
	}
}
