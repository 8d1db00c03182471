// Package dockertest gives tests a Docker daemon and an image to start
// containers from: the daemon .ci/run starts (DSH_TEST_DOCKER_HOST), and an
// image imported from this machine's own bash, coreutils and libraries,
// since no image registry can be reached.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// Image is the image Daemon builds from this machine's own bash and
// coreutils: no registry is needed.
const Image = "dsh-test-shell:3"

// Daemon returns the address of the Docker daemon the tests use
// (DSH_TEST_DOCKER_HOST, which .ci/run sets to a daemon it starts), and
// makes sure the test image is there. Without one the test skips, saying
// why, unless DSH_REQUIRE_DOCKER=1 makes that a failure.
func Daemon(t testing.TB) string {
	t.Helper()
	host := os.Getenv("DSH_TEST_DOCKER_HOST")
	if host == "" {
		if os.Getenv("DSH_REQUIRE_DOCKER") == "1" {
			t.Fatal("DSH_REQUIRE_DOCKER=1 but DSH_TEST_DOCKER_HOST names no daemon")
		}
		t.Skip("no Docker daemon for the tests: set DSH_TEST_DOCKER_HOST (.ci/run starts one)")
	}
	imageOnce.Do(func() { imageErr = ensureImage(host) })
	if imageErr != nil {
		t.Fatalf("the test image: %v", imageErr)
	}
	return host
}

var (
	imageOnce sync.Once
	imageErr  error
)

// ensureImage imports Image unless the daemon has it.
func ensureImage(host string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer api.Close()
	if _, err := api.ImageInspect(ctx, Image); err == nil {
		return nil
	}
	rootfs, err := rootfsTar()
	if err != nil {
		return err
	}
	rc, err := api.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, Image, image.ImportOptions{})
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

// imageTools are the programs the image holds, with their libraries.
var imageTools = []string{"bash", "sh", "cat", "ls", "echo", "sleep", "true", "false", "env", "id", "mkdir", "rm", "touch", "printf", "head", "tail", "seq", "stty", "wc", "tr", "sed", "grep", "kill", "ps", "dd", "tty", "cut", "mktemp", "timeout", "cp", "chmod", "mknod", "stat"}

var lddPath = regexp.MustCompile(`(/\S+)`)

// rootfsTar is a root filesystem, as a tar stream, of this machine's own
// binaries: merged /usr, the tools, their shared libraries and loader.
func rootfsTar() ([]byte, error) {
	files := map[string]bool{}
	for _, tool := range imageTools {
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
