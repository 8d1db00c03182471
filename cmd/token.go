//go:build linux

package dshcmd

import (
	"errors"
	"fmt"
	"io"
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

// tokenFileFor keeps the generated token of the server at addr (the
// --http address as given) in the private directory, 0600, and returns
// its path and the token. A token kept there by an earlier start is
// reused, so the client settings printed then still work after a restart;
// rotate, or a file that is not private or holds no valid token, makes a
// new one. A new file is written beside its final name and renamed over
// it, so no reader ever sees a partial token.
func tokenFileFor(addr string, rotate bool) (path, token string, err error) {
	dir, err := private.Dir()
	if err != nil {
		return "", "", fmt.Errorf("keep the token: %w", err)
	}
	name := "http-" + strings.NewReplacer(":", "-", "[", "", "]", "", "/", "-").Replace(addr) + ".token"
	path = filepath.Join(dir, name)
	if !rotate {
		if token, ok := readKeptToken(path); ok {
			return path, token, nil
		}
	}
	token = mcpfront.NewToken()
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return "", "", fmt.Errorf("keep the token: %w", err)
	}
	_, werr := io.WriteString(tmp, token+"\n")
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return "", "", fmt.Errorf("keep the token: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", "", fmt.Errorf("keep the token: %w", err)
	}
	return path, token, nil
}

// readKeptToken reads the token an earlier start kept at path: one line,
// the file private to this user.
func readKeptToken(path string) (string, bool) {
	if checkPrivateFile(path) != nil {
		return "", false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	token := strings.TrimSpace(string(data))
	if strings.ContainsAny(token, " \t\n") {
		return "", false
	}
	if _, err := mcpfront.NewTokens(token); err != nil {
		return "", false
	}
	return token, true
}

// clientSnippets are ready-to-paste client settings for a server at url
// whose token is in tokenFile, one line each but Codex's, whose TOML
// table takes several.
func clientSnippets(url, tokenFile string) []string {
	return []string{
		fmt.Sprintf(`Claude Code: claude mcp add --transport http dsh %s --header "Authorization: Bearer $(cat %s)"`, url, tokenFile),
		fmt.Sprintf(`Codex: export DSH_TOKEN="$(cat %s)", and in ~/.codex/config.toml:`, tokenFile),
		`  [mcp_servers.dsh]`,
		fmt.Sprintf(`  url = %q`, url),
		`  bearer_token_env_var = "DSH_TOKEN"`,
		fmt.Sprintf(`Gemini CLI: export DSH_TOKEN="$(cat %s)", and in ~/.gemini/settings.json: {"mcpServers": {"dsh": {"httpUrl": "%s", "headers": {"Authorization": "Bearer $DSH_TOKEN"}}}}`, tokenFile, url),
		fmt.Sprintf(`Cursor: export DSH_TOKEN="$(cat %s)", and in .cursor/mcp.json: {"mcpServers": {"dsh": {"url": "%s", "headers": {"Authorization": "Bearer ${env:DSH_TOKEN}"}}}}`, tokenFile, url),
	}
}
