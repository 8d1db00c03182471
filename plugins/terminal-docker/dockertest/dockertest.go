// Package dockertest gives tests a Docker daemon and an image to start
// containers from: the daemon .ci/run starts (DSH_TEST_DOCKER_HOST), and an
// image imported from this machine's own bash, coreutils and libraries,
// since no image registry can be reached.
package dockertest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal-docker/localimage"
)

// Image is the image Daemon builds from this machine's own bash and
// coreutils: no registry is needed.
const Image = "dsh-test-shell:4"

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
	_, err := localimage.Import(ctx, host, Image, false)
	return err
}
