//go:build linux

package dshcmd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// keptToken starts dsh serve --http on addr with env and args, and returns
// the token file and token it printed, then stops it.
func keptToken(t *testing.T, env []string, args ...string) (path, token string) {
	t.Helper()
	d := startHTTPEnv(t, env, args...)
	m := tokenLine.FindStringSubmatch(d.authLine)
	if m == nil {
		t.Fatalf("auth line %q", d.authLine)
	}
	data, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	d.client.Transport = bearer{strings.TrimSpace(string(data)), d.client.Transport}
	cs := d.connect(t)
	if text, _ := bash(t, cs, "echo in"); text != "in" {
		t.Fatalf("with the printed token: %q", text)
	}
	cs.Close()
	d.stop(t, syscall.SIGTERM)
	return m[1], strings.TrimSpace(string(data))
}

// TestE2EHTTPTokenKeptAcrossRestarts: the client settings printed at one
// start still work after a restart (the token is kept in the private
// directory), until --rotate-token makes a new one.
func TestE2EHTTPTokenKeptAcrossRestarts(t *testing.T) {
	env := []string{"XDG_RUNTIME_DIR=" + t.TempDir()}
	path1, token1 := keptToken(t, env)
	path2, token2 := keptToken(t, env)
	if path1 != path2 || token1 != token2 {
		t.Fatalf("after a restart: %s %q, want %s %q again", path2, token2, path1, token1)
	}
	path3, token3 := keptToken(t, env, "--rotate-token")
	if path3 != path1 || token3 == token1 {
		t.Fatalf("--rotate-token: %s %q, want a new token in %s", path3, token3, path1)
	}
	// The file serves as --token-file, as the printed line says.
	d := startHTTPEnv(t, env, "--token-file", path3)
	d.client.Transport = bearer{token3, d.client.Transport}
	cs := d.connect(t)
	if text, _ := bash(t, cs, "echo again"); text != "again" {
		t.Fatalf("with --token-file: %q", text)
	}
	cs.Close()
}

// TestE2EHTTPCodexSettingsAreTOML: what dsh prints for Codex's
// config.toml parses as TOML (Python's tomllib), with the url and the
// token's variable in the [mcp_servers.dsh] table.
func TestE2EHTTPCodexSettingsAreTOML(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to parse TOML with")
	}
	d := startHTTPEnv(t, []string{"XDG_RUNTIME_DIR=" + t.TempDir()})
	stderr := d.stderr.waitFor(t, "bearer_token_env_var", time.Minute)
	m := codexSnippet.FindStringSubmatch(d.authLine + "\n" + stderr)
	if m == nil {
		t.Fatalf("no Codex settings in:\n%s", stderr)
	}
	parse := exec.Command("python3", "-c", "import json, sys, tomllib; print(json.dumps(tomllib.loads(sys.stdin.read())))")
	parse.Stdin = strings.NewReader(codexTOML(m[2]))
	out, err := parse.CombinedOutput()
	if err != nil {
		t.Fatalf("not TOML: %v\n%s\n%s", err, out, codexTOML(m[2]))
	}
	var doc struct {
		MCPServers map[string]map[string]string `json:"mcp_servers"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if s := doc.MCPServers["dsh"]; s["url"] != d.url || s["bearer_token_env_var"] != "DSH_TOKEN" {
		t.Fatalf("parsed %s, want url %s and DSH_TOKEN", out, d.url)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "dsh test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestE2EHTTPS: --tls-cert and --tls-key serve HTTPS, which the go-sdk
// client speaks to; plain HTTP on that port is refused.
func TestE2EHTTPS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	d := startHTTP(t, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(d.url, "https://127.0.0.1:") {
		t.Fatalf("serving at %s, want https", d.url)
	}
	plain := strings.Replace(d.url, "https://", "http://", 1)
	if resp, err := http.Post(plain, "application/json", strings.NewReader("{}")); err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("plain HTTP: %s", resp.Status)
		}
	}
	d.client.Transport = bearer{testToken, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	cs := d.connect(t)
	defer cs.Close()
	if text, _ := bash(t, cs, "echo over tls"); text != "over tls" {
		t.Fatalf("over HTTPS: %q", text)
	}
	if strings.Contains(d.stderr.String(), "WARNING") {
		t.Fatalf("a warning on loopback: %s", d.stderr.String())
	}
}

// TestE2EHTTPPlainOffLoopbackWarns: plain HTTP on an address other hosts
// can reach says, once, what crosses the network in clear.
func TestE2EHTTPPlainOffLoopbackWarns(t *testing.T) {
	d := startHTTPEnv(t, []string{"XDG_RUNTIME_DIR=" + t.TempDir()}, "--http", "0.0.0.0:0")
	d.stderr.waitFor(t, "WARNING: plain HTTP on 0.0.0.0:", time.Minute)
	d.stop(t, syscall.SIGTERM)
	if strings.Count(d.stderr.String(), "WARNING") != 1 {
		t.Fatalf("stderr:\n%s", d.stderr.String())
	}
}
