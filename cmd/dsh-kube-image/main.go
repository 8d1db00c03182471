// Command dsh-kube-image writes the images the kubernetes backend's tests
// and a registry-less cluster need, as `docker save` archives that
// `ctr -n k8s.io images import` takes:
//
//	dsh-shell:local        this machine's bash, coreutils and libraries (as for the docker backend),
//	                       and the pod helper at /usr/local/bin/dsh-kube-helper (helperPath: no
//	                       init container)
//	dsh-kube-helper:local  the pod helper, static, at /dsh-kube-helper
//	dsh-kube-pause:local   the same helper as the pod sandbox's pause process (hold)
//
// It builds the helper (CGO_ENABLED=0) from this checkout.
//
//	go run ./cmd/dsh-kube-image -out DIR
//	for f in DIR/*.tar; do ctr -n k8s.io images import "$f"; done
//
// scripts/kubernetes/cluster.sh runs it.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"

	"github.com/dshdev/dsh/plugins/terminal-docker/localimage"
)

func main() {
	out := flag.String("out", "", "the directory to write the archives to")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: dsh-kube-image -out DIR")
		os.Exit(2)
	}
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "dsh-kube-image:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	shell, err := localimage.RootFS()
	if err != nil {
		return fmt.Errorf("the shell image's files: %w", err)
	}
	helper, err := buildHelper(out)
	if err != nil {
		return err
	}
	helperLayer, err := oneFileLayer("dsh-kube-helper", helper)
	if err != nil {
		return err
	}
	inShell, err := oneFileLayer("usr/local/bin/dsh-kube-helper", helper)
	if err != nil {
		return err
	}
	images := []struct {
		file, tag  string
		layers     [][]byte
		entrypoint []string
	}{
		{"shell.tar", "dsh-shell:local", [][]byte{shell, inShell}, []string{"/bin/bash"}},
		{"helper.tar", "dsh-kube-helper:local", [][]byte{helperLayer}, []string{"/dsh-kube-helper"}},
		{"pause.tar", "dsh-kube-pause:local", [][]byte{helperLayer}, []string{"/dsh-kube-helper", "hold"}},
	}
	for _, img := range images {
		if err := writeArchive(filepath.Join(out, img.file), img.tag, img.layers, img.entrypoint); err != nil {
			return fmt.Errorf("%s: %w", img.tag, err)
		}
	}
	return nil
}

// buildHelper builds cmd/dsh-kube-helper, static, and returns it.
func buildHelper(dir string) ([]byte, error) {
	bin := filepath.Join(dir, "dsh-kube-helper")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "github.com/dshdev/dsh/cmd/dsh-kube-helper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("build the helper: %w", err)
	}
	return os.ReadFile(bin)
}

// oneFileLayer is a layer of one executable file at name, with its parent
// directories.
func oneFileLayer(name string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var parents []string
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		parents = append([]string{dir}, parents...)
	}
	for _, dir := range parents {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeArchive writes an image of layers, the first at the bottom, in the
// format of `docker save`.
func writeArchive(path, tag string, layers [][]byte, entrypoint []string) error {
	var diffIDs, layerNames []string
	files := []struct {
		name string
		data []byte
	}{}
	for _, layer := range layers {
		sum := sha256.Sum256(layer)
		diffIDs = append(diffIDs, "sha256:"+hex.EncodeToString(sum[:]))
		name := hex.EncodeToString(sum[:]) + "/layer.tar"
		layerNames = append(layerNames, name)
		files = append(files, struct {
			name string
			data []byte
		}{name, layer})
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": entrypoint,
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	if err != nil {
		return err
	}
	csum := sha256.Sum256(config)
	configName := hex.EncodeToString(csum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{tag}, "Layers": layerNames}})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, e := range append(files, []struct {
		name string
		data []byte
	}{{configName, config}, {"manifest.json", manifest}}...) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data))}); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
