// Package localimage builds a Docker image for the docker backend from
// this machine's own bash, coreutils and their libraries, and imports it
// into a daemon: no registry is needed, and nothing is pulled. The tests
// use it, and so can anyone whose machine reaches no registry
// (cmd/dsh-docker-image, scripts/docker-image.sh).
package localimage

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/moby/moby/client"
)

// Import builds the image (RootFS) and imports it into the daemon at host
// (empty: DOCKER_HOST, else the local default) under tag. An image
// already there under tag is kept unless replace is set. It reports
// whether it imported one.
func Import(ctx context.Context, host, tag string, replace bool) (bool, error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	api, err := client.New(opts...)
	if err != nil {
		return false, err
	}
	defer api.Close()
	if !replace {
		if _, err := api.ImageInspect(ctx, tag); err == nil {
			return false, nil
		}
	}
	rootfs, err := RootFS()
	if err != nil {
		return false, fmt.Errorf("the image's files: %w", err)
	}
	rc, err := api.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, tag, client.ImageImportOptions{})
	if err != nil {
		return false, fmt.Errorf("import into the daemon at %s: %w", api.DaemonHost(), err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return false, err
	}
	return true, nil
}

// Tools are the programs the image holds, with their shared libraries.
var Tools = []string{"bash", "sh", "cat", "ls", "echo", "sleep", "true", "false", "env", "id", "mkdir", "rm", "touch", "printf", "head", "tail", "seq", "stty", "wc", "tr", "sed", "grep", "kill", "ps", "dd", "tty", "cut", "mktemp", "timeout", "cp", "chmod", "mknod", "stat", "sha256sum"}

var lddPath = regexp.MustCompile(`(/\S+)`)

// RootFS is a root filesystem, as a tar stream, of this machine's own
// binaries: merged /usr, the Tools that are installed here, their shared
// libraries and loader, an /etc/passwd with root and agent (1000:1000)
// whose home is /workspace, and /tmp.
func RootFS() ([]byte, error) {
	files := map[string]bool{}
	for _, tool := range Tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			continue
		}
		files[p] = true
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			continue // static
		}
		for _, m := range lddPath.FindAllString(string(out), -1) {
			files[m] = true
		}
	}
	// Where each file lives in a merged-/usr tree (/lib64/x is
	// /usr/lib64/x, /sbin/x is /usr/bin/x), once.
	entries := map[string]string{}
	dirs := map[string]bool{"usr": true, "usr/bin": true, "usr/lib": true, "usr/lib64": true, "etc": true, "proc": true, "sys": true, "dev": true, "workspace": true, "root": true}
	for p := range files {
		name := strings.TrimPrefix(p, "/")
		for _, top := range []string{"bin/", "sbin/", "lib/", "lib64/"} {
			if strings.HasPrefix(name, top) {
				name = "usr/" + name
			}
		}
		if rest, ok := strings.CutPrefix(name, "usr/sbin/"); ok {
			name = "usr/bin/" + rest
		}
		entries[name] = p
		for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}); err != nil {
		return nil, err
	}
	for _, l := range [][2]string{{"bin", "usr/bin"}, {"sbin", "usr/bin"}, {"lib", "usr/lib"}, {"lib64", "usr/lib64"}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: l[0], Linkname: l[1]}); err != nil {
			return nil, err
		}
	}
	etc := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/bash\nagent:x:1000:1000::/workspace:/bin/bash\n",
		"etc/group":  "root:x:0:\nagent:x:1000:\n",
	}
	for _, name := range slices.Sorted(maps.Keys(etc)) {
		body := etc[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			return nil, err
		}
		tw.Write([]byte(body))
	}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		data, err := os.ReadFile(entries[name]) // follows symlinks: the image holds copies
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data))}); err != nil {
			return nil, err
		}
		tw.Write(data)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
