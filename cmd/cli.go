//go:build linux

package dshcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dshdev/dsh/deployments"
	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/gcfloor"
	"github.com/dshdev/dsh/internal/harden"
	"github.com/dshdev/dsh/plugins/invariant"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
)

// Exit statuses. A bad deployment or bad flags is the caller's mistake (2);
// a failure while running is 1.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks errors that exit with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// version is set at build time with
// -ldflags "-X github.com/dshdev/dsh/cmd.version=v1.2.3" (the variable is
// this package's, not main's; TestVersionFromLinker builds with it);
// otherwise the module version from the build info is used.
var version = ""

// globals are the flags every command shares.
type globals struct {
	deployment string
	logLevel   string
	// checkInvariants loads the invariants service, which runs the checks
	// of the deployment's plugins.
	checkInvariants bool
	stdin           io.Reader
	stdout          io.Writer
	stderr          io.Writer
}

// Main runs the command line of os.Args with the plugins linked into the
// binary, and exits with its status. It first makes the process
// non-dumpable: the shells it starts must not read its memory or
// environment through /proc.
func Main() {
	// A keeper of this binary's own backends (durable shells) runs the
	// same binary under another name, and does nothing else.
	backendplugin.KeeperMain()
	if err := harden.NotDumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "dsh:", err)
		os.Exit(1)
	}
	gcfloor.Start()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the CLI and returns the exit status. It never panics on bad
// input and never prints a stack trace: every error is one line on stderr.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCommand(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintln(stderr, "dsh: "+oneLine(err.Error()))
	var ue usageError
	var de *host.DeploymentError
	if errors.As(err, &ue) || errors.As(err, &de) {
		return exitUsage
	}
	return exitFailure
}

// exitCode ends a command with a status and no message (the command has
// already printed what it had to say).
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

func newRootCommand(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "dsh",
		Short:         "A persistent bash shell for LLM agents, as a tool",
		Long:          "dsh loads a deployment of plugins and serves their tools: over MCP (dsh serve), to a person (dsh repl), or one call at a time (dsh call).",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q (see dsh --help)", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	root.PersistentFlags().StringVarP(&g.deployment, "deployment", "d", "", "deployment YAML file (default: the embedded default.yaml)")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "warn", "log level on stderr: debug, info, warn or error")
	root.PersistentFlags().BoolVar(&g.checkInvariants, "check-invariants", false, "run the plugins' runtime invariants after every tool call and on close; a violation fails the call and is logged (also: DSH_CHECK_INVARIANTS=1)")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())}
	})
	root.CompletionOptions.DisableDefaultCmd = true
	for _, c := range []func(*globals) *cobra.Command{
		serveCommand, replCommand, checkCommand, toolsCommand, callCommand, sessionsCommand, versionCommand,
	} {
		root.AddCommand(c(g))
	}
	return root
}

// usageArgs makes an argument-count failure exit with status 2.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())}
		}
		return nil
	}
}

func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)}
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level})), nil
}

// checkInvariantsEnv set to 1 turns --check-invariants on, for every dsh
// a test suite starts.
const checkInvariantsEnv = "DSH_CHECK_INVARIANTS"

// readDeployment parses the --deployment file, or the embedded default.
func (g *globals) readDeployment() (*host.Deployment, error) {
	if g.deployment == "" {
		return host.ParseDeployment(deployments.DefaultName, deployments.Default, nil)
	}
	d, err := host.ReadDeployment(g.deployment, nil)
	if pathErr := (*fs.PathError)(nil); errors.As(err, &pathErr) {
		return nil, usageError{err} // a file that is not there is the flag's fault
	}
	if err == nil && len(d.Entries) == 0 {
		// Most likely the wrong file, or one not written yet: nothing
		// would be served.
		return nil, &host.DeploymentError{File: d.Source, Err: errors.New("no entries: a deployment is a YAML list of plugin entries (see deployments/default.yaml)")}
	}
	return d, err
}

// loadHost reads the deployment and starts its plugins; workdir is where
// sessions start (see host.WithWorkdir), "" for the working directory.
func (g *globals) loadHost(ctx context.Context, workdir string, opts ...host.Option) (*host.Host, error) {
	logger, err := g.logger()
	if err != nil {
		return nil, err
	}
	d, err := g.readDeployment()
	if err != nil {
		return nil, err
	}
	if g.checkInvariants || os.Getenv(checkInvariantsEnv) == "1" {
		invariant.Augment(d)
	}
	return host.Load(ctx, d, append([]host.Option{host.WithLogger(logger), host.WithWorkdir(workdir)}, opts...)...)
}

func versionString() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}
