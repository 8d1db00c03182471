// Command dsh-docker-image builds an image for the docker backend from this
// machine's own bash, coreutils and libraries, and imports it into a Docker
// daemon: for machines that reach no image registry (nothing is pulled).
//
//	go run ./cmd/dsh-docker-image                     # dsh-shell:local on DOCKER_HOST or the local daemon
//	go run ./cmd/dsh-docker-image -tag my/shell:1 -host unix:///run/user/1000/docker.sock
//
// Then serve deployments/docker.yaml with DSH_DOCKER_IMAGE set to the tag.
// scripts/docker-image.sh runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dshdev/dsh/plugins/terminal-docker/localimage"
)

func main() {
	tag := flag.String("tag", "dsh-shell:local", "the image's name")
	host := flag.String("host", "", "the Docker daemon (default: DOCKER_HOST, else the local socket)")
	replace := flag.Bool("replace", false, "build it again even if the daemon has an image of that name")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: dsh-docker-image [-tag NAME] [-host ADDR] [-replace]\n\nBuilds an image of this machine's %s and their libraries, and imports it.\n\n", strings.Join(localimage.Tools, ", "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	imported, err := localimage.Import(ctx, *host, *tag, *replace)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dsh-docker-image:", err)
		os.Exit(1)
	}
	if imported {
		fmt.Printf("imported %s\n", *tag)
	} else {
		fmt.Printf("%s is there already (-replace builds it again)\n", *tag)
	}
	fmt.Printf("serve it: DSH_DOCKER_IMAGE=%s dsh serve --deployment deployments/docker.yaml\n", *tag)
}
