package terminaldocker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/docker/go-units"
	"github.com/moby/moby/api/types/mount"

	"github.com/dshdev/dsh/config"
)

// Config configures the docker backend. Exactly one of Image and Container
// is set. Every duration is in milliseconds.
type Config struct {
	// BackendType is the name sessions are spawned under in the terminals
	// service.
	BackendType string `json:"backendType"`
	// Host is the Docker daemon's address: unix:///var/run/docker.sock or
	// tcp://host:2376 (TLS from DOCKER_TLS_VERIFY and DOCKER_CERT_PATH).
	// Empty: DOCKER_HOST, else the local default socket.
	Host string `json:"host"`
	// Image is what each session's container is created from: one
	// container per session, removed when the session closes. The image
	// must be on the daemon already (nothing is pulled) and have bash.
	Image string `json:"image"`
	// Container is an existing, running container to exec each session's
	// shell in, instead of creating one. It is never removed; closing a
	// session ends its shell and the shell's processes.
	Container string `json:"container"`
	// Workspace is the host directory mounted read-write at MountPath in a
	// created container. Empty: the session's working directory (the
	// owner's workspace); with neither, nothing is mounted.
	Workspace string `json:"workspace"`
	// MountPath is where the workspace appears in the container, and where
	// the shell starts.
	MountPath string `json:"mountPath"`
	// Mounts are more host paths bind-mounted into a created container:
	// "SRC:DST" (read-write) or "SRC:DST:ro", both absolute ("/srv/cache:/cache",
	// "/usr/share/dict:/usr/share/dict:ro").
	Mounts []string `json:"mounts"`
	// Network is the created container's network mode: "none" (only
	// loopback), "bridge", "host" or a network's name.
	Network string `json:"network"`
	// Memory limits a created container's memory ("512m", "2g"). Empty:
	// 2g; "unlimited": no limit.
	Memory string `json:"memory"`
	// CPUs limits a created container's CPU time, in CPUs (1.5); 0: no
	// limit.
	CPUs float64 `json:"cpus"`
	// PidsLimit bounds the processes of a created container. 0: 1024; -1:
	// no limit.
	PidsLimit int64 `json:"pidsLimit"`
	// User runs the shell as this user ("1000", "1000:1000", "agent",
	// "root"). Empty: dsh's own uid and gid in a created container (files
	// the shell makes in the workspace are then dsh's user's), the
	// container's user in an existing one.
	User string `json:"user"`
	// CapAdd are capabilities a created container keeps ("CHOWN",
	// "NET_BIND_SERVICE"); every other one is dropped, and none is kept
	// by default.
	CapAdd []string `json:"capAdd"`
	// NewPrivileges lets setuid programs and file capabilities raise a
	// created container's privileges (sudo, ping); by default the
	// container runs with no-new-privileges.
	NewPrivileges bool `json:"newPrivileges"`
	// Seccomp is a created container's seccomp profile. Empty: Docker's
	// default profile with setuid and setgid modes refused (chmod and file
	// creation), so that no such file is left in the host's project;
	// "docker-default": the daemon's own default; "unconfined": none; else
	// the path of a profile (JSON, Docker's format).
	Seccomp string `json:"seccomp"`
	// Shell is bash's path inside the container.
	Shell string `json:"shell"`
	// Env sets variables for the shell. Nothing of dsh's own environment
	// reaches the container.
	Env map[string]string `json:"env"`
	// IdleSilenceMs is how long a send waits without output and without
	// proof that the terminal waits for input before it settles as
	// inferred_idle.
	IdleSilenceMs int `json:"idleSilenceMs"`
	// TimeoutMs bounds one send, and the start of a session (container and
	// shell), when the send does not set its own timeout.
	TimeoutMs int `json:"timeoutMs"`
}

// Type is the default backend type.
const Type = "docker"

// DefaultConfig returns the configuration a deployment starts from.
func DefaultConfig() *Config {
	return &Config{
		BackendType:   Type,
		MountPath:     "/workspace",
		Network:       "none",
		Shell:         "/bin/bash",
		IdleSilenceMs: 3000,
		TimeoutMs:     30000,
	}
}

// DecodeConfig decodes a config given as JSON over the defaults, strictly
// (an unknown key is an error), and validates it.
func DecodeConfig(raw json.RawMessage) (*Config, error) {
	cfg := DefaultConfig()
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cfg); err != nil {
			return nil, fmt.Errorf("terminal-docker: config: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// maxMillis bounds every millisecond setting, as the shell backend does.
const maxMillis = 1<<31 - 1

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.BackendType == "":
		return config.FieldErrorf("backendType", "terminal-docker: backendType must be non-empty")
	case c.Image == "" && c.Container == "":
		return config.FieldErrorf("image", "terminal-docker: set image (a container per session) or container (an existing one)")
	case c.Image != "" && c.Container != "":
		return config.FieldErrorf("container", "terminal-docker: image and container exclude each other: set one")
	case !path.IsAbs(c.MountPath):
		return config.FieldErrorf("mountPath", "terminal-docker: mountPath must be an absolute path in the container; got %q", c.MountPath)
	case !path.IsAbs(c.Shell):
		return config.FieldErrorf("shell", "terminal-docker: shell must be an absolute path in the container; got %q", c.Shell)
	case c.CPUs < 0:
		return config.FieldErrorf("cpus", "terminal-docker: cpus must not be negative")
	case c.PidsLimit < -1:
		return config.FieldErrorf("pidsLimit", "terminal-docker: pidsLimit must be a count, 0 for the default (%d) or -1 for no limit", defaultPidsLimit)
	case c.Network == "":
		return config.FieldErrorf("network", "terminal-docker: network must be non-empty (none for no network)")
	}
	if c.Memory != "" && c.Memory != memoryUnlimited {
		if _, err := units.RAMInBytes(c.Memory); err != nil {
			return config.FieldErrorf("memory", "terminal-docker: memory must be a size (512m, 2g) or %q: %v", memoryUnlimited, err)
		}
	}
	if c.Seccomp != seccompDSH && c.Seccomp != seccompDockerDefault && c.Seccomp != seccompUnconfined {
		if !filepath.IsAbs(c.Seccomp) {
			return config.FieldErrorf("seccomp", "terminal-docker: seccomp must be empty, %q, %q or a profile's absolute path; got %q", seccompDockerDefault, seccompUnconfined, c.Seccomp)
		}
		if _, err := os.Stat(c.Seccomp); err != nil {
			return config.FieldErrorf("seccomp", "terminal-docker: seccomp: %v", err)
		}
	}
	if c.Workspace != "" {
		if !filepath.IsAbs(c.Workspace) {
			return config.FieldErrorf("workspace", "terminal-docker: workspace must be an absolute path; got %q", c.Workspace)
		}
		if fi, err := os.Stat(c.Workspace); err != nil || !fi.IsDir() {
			return config.FieldErrorf("workspace", "terminal-docker: workspace %s is not a directory", c.Workspace)
		}
	}
	for _, m := range c.Mounts {
		if _, err := parseMount(m); err != nil {
			return config.FieldErrorf("mounts", "terminal-docker: mounts: %v", err)
		}
	}
	if c.Container != "" {
		for _, f := range []struct {
			field string
			set   bool
		}{{"workspace", c.Workspace != ""}, {"mounts", len(c.Mounts) > 0}, {"memory", c.Memory != ""}, {"cpus", c.CPUs != 0}, {"pidsLimit", c.PidsLimit != 0}, {"capAdd", len(c.CapAdd) > 0}, {"newPrivileges", c.NewPrivileges}, {"seccomp", c.Seccomp != seccompDSH}} {
			if f.set {
				return config.FieldErrorf(f.field, "terminal-docker: %s applies to containers dsh creates (image), not to an existing container", f.field)
			}
		}
	}
	for name := range c.Env {
		if name == "" || bytes.ContainsAny([]byte(name), "=\x00") {
			return config.FieldErrorf("env", "terminal-docker: env: %q is not a variable name", name)
		}
	}
	for _, p := range []struct {
		field string
		value int
	}{{"idleSilenceMs", c.IdleSilenceMs}, {"timeoutMs", c.TimeoutMs}} {
		if p.value <= 0 || p.value > maxMillis {
			return config.FieldErrorf(p.field, "terminal-docker: %s must be a positive integer of at most %d", p.field, maxMillis)
		}
	}
	return nil
}

// The limits of a created container when the config sets none: enough
// for builds and test suites, not for a fork bomb or a leak to take the
// machine. memoryUnlimited and -1 lift them.
const (
	defaultMemory    = "2g"
	defaultPidsLimit = 1024
	memoryUnlimited  = "unlimited"
)

// parseMount parses one of Config.Mounts.
func parseMount(spec string) (mount.Mount, error) {
	parts := strings.Split(spec, ":")
	if len(parts) == 3 && parts[2] != "ro" || len(parts) < 2 || len(parts) > 3 {
		return mount.Mount{}, fmt.Errorf("%q is not SRC:DST or SRC:DST:ro", spec)
	}
	src, dst := parts[0], parts[1]
	if !filepath.IsAbs(src) || !path.IsAbs(dst) {
		return mount.Mount{}, fmt.Errorf("%q: both paths must be absolute", spec)
	}
	if _, err := os.Stat(src); err != nil {
		return mount.Mount{}, fmt.Errorf("%q: %v", spec, err)
	}
	return mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: len(parts) == 3}, nil
}
