#!/usr/bin/env bash
# Builds an image for the docker backend from this machine's own bash,
# coreutils and libraries and imports it into the Docker daemon
# (DOCKER_HOST, else the local socket): no registry is needed. Arguments go
# to cmd/dsh-docker-image (-tag NAME, -host ADDR, -replace).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./cmd/dsh-docker-image "$@"
