//go:build !linux

package terminaldocker

import (
	"errors"
	"fmt"
	"os"
)

const (
	seccompDSH           = ""
	seccompDockerDefault = "docker-default"
	seccompUnconfined    = "unconfined"
)

// securityOpts: dsh's profile is built from Docker's default one, which
// its package defines on Linux only; elsewhere a profile must be named.
func securityOpts(cfg *Config) ([]string, error) {
	var opts []string
	if !cfg.NewPrivileges {
		opts = append(opts, "no-new-privileges")
	}
	switch cfg.Seccomp {
	case seccompDockerDefault:
	case seccompUnconfined:
		opts = append(opts, "seccomp=unconfined")
	case seccompDSH:
		return nil, errors.New("terminal-docker: dsh's seccomp profile is built on Linux only: set seccomp to docker-default, unconfined or a profile's path")
	default:
		profile, err := os.ReadFile(cfg.Seccomp)
		if err != nil {
			return nil, fmt.Errorf("terminal-docker: seccomp: %w", err)
		}
		opts = append(opts, "seccomp="+string(profile))
	}
	return opts, nil
}
