//go:build linux

package dshcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dshdev/dsh/host"
)

func checkCommand(g *globals) *cobra.Command {
	var showConfig, probe bool
	var workdir string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate a deployment and print the resolved plugin graph",
		Long: `check parses the deployment, decodes every entry's config strictly, resolves
services and load order, starts the plugins and stops them again, then prints
what it found. Loading checks what the deployment can know: every config
decoded strictly, every service wired, and every tool's backendType
registered by some entry. With --probe it also tries every backend as an
owner's first call would, starting a session and closing it (an SSH
backend connects, checks the host key and logs in; a Docker backend
starts a container; a sandboxed shell sets up its namespaces and
Landlock), and names the entry and line of each that fails. With --config
it prints each entry's config as the plugin gets it, defaults filled in,
as JSON (catalog/config-catalog.md says what the fields mean).`,
		Example: `  dsh check -d deploy.yaml
  dsh check -d deployments/ssh.yaml --probe`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var probes []host.ProbeResult
			var during func(*host.Host)
			if probe {
				wd, err := resolveWorkdir(workdir)
				if err != nil {
					return err
				}
				during = func(h *host.Host) { probes = h.Probe(cmd.Context(), wd) }
			}
			plan, tools, err := g.inspectWith(cmd.Context(), during)
			if err != nil {
				return err
			}
			if showConfig {
				return printConfigs(g, plan)
			}
			printPlan(g, plan, tools, probe, probes)
			return probesFailed(probes)
		},
	}
	cmd.Flags().BoolVar(&showConfig, "config", false, "print every entry's effective config (defaults filled in; an executable's entry as written) as JSON")
	cmd.Flags().BoolVar(&probe, "probe", false, "also start and close a session of every backend, as a first call would")
	cmd.Flags().StringVarP(&workdir, "workdir", "w", "", "with --probe: the probe owner's workspace (default: the current directory)")
	return cmd
}

// probesFailed is the error of a check whose probes did not all work.
func probesFailed(probes []host.ProbeResult) error {
	failed := 0
	for _, p := range probes {
		if p.Err != nil {
			failed++
		}
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d probes failed", failed, len(probes))
}

// printConfigs prints the effective config of every step: entry path,
// plugin and config, in load order.
func printConfigs(g *globals, plan *host.Plan) error {
	type entry struct {
		Entry  string `json:"entry"`
		Plugin string `json:"plugin"`
		Config any    `json:"config"`
	}
	out := make([]entry, 0, len(plan.Steps))
	for _, s := range plan.Steps {
		out = append(out, entry{Entry: s.Entry.Path, Plugin: s.Plugin.Name, Config: s.Config})
	}
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// inspect starts the deployment's plugins, notes what they registered, and
// stops them again: loading is the only complete validation of a deployment.
func (g *globals) inspect(ctx context.Context) (*host.Plan, []host.ToolInfo, error) {
	return g.inspectWith(ctx, nil)
}

// inspectWith is inspect that runs during, when not nil, on the loaded
// host before it stops.
func (g *globals) inspectWith(ctx context.Context, during func(*host.Host)) (*host.Plan, []host.ToolInfo, error) {
	h, err := g.loadHost(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	tools := h.Tools().List()
	if during != nil {
		during(h)
	}
	if err := h.Close(context.WithoutCancel(ctx)); err != nil {
		return nil, nil, err
	}
	return h.Plan(), tools, nil
}

func printPlan(g *globals, plan *host.Plan, tools []host.ToolInfo, probed bool, probes []host.ProbeResult) {
	w := g.stdout
	fmt.Fprintf(w, "deployment: %s\n", plan.Source)
	if len(plan.Steps) == 0 {
		fmt.Fprintln(w, "plugins: none")
	} else {
		fmt.Fprintln(w, "load order:")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for i, s := range plan.Steps {
			var wiring []string
			if len(s.Plugin.Provides) > 0 {
				wiring = append(wiring, "provides "+keysWithRealm(s, s.Plugin.Provides))
			}
			if len(s.Plugin.Inject) > 0 {
				var from []string
				for _, key := range s.Plugin.Inject {
					src := "host"
					if p := s.Deps[key]; p != nil {
						src = p.Entry.Path
					}
					from = append(from, fmt.Sprintf("%s%s ← %s", key, realmSuffix(s.Realm(key)), src))
				}
				wiring = append(wiring, "injects "+strings.Join(from, ", "))
			}
			fmt.Fprintf(tw, "  %d.\t%s\t(%s)\t%s\n", i+1, s.Entry.Path, s.Plugin.Name, strings.Join(wiring, "; "))
		}
		tw.Flush()
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	if len(names) == 0 {
		fmt.Fprintln(w, "tools: none")
	} else {
		fmt.Fprintf(w, "tools: %s\n", strings.Join(names, ", "))
	}
	if probed {
		printProbes(w, probes)
		if probesFailed(probes) != nil {
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

// printProbes prints how each probe went, located like a load error.
func printProbes(w io.Writer, probes []host.ProbeResult) {
	if len(probes) == 0 {
		fmt.Fprintln(w, "probes: none (no backend registered)")
		return
	}
	fmt.Fprintln(w, "probes:")
	for _, p := range probes {
		at := fmt.Sprintf("%s:%d: entry %q (%s): %s", p.File, p.Line, p.Entry, p.Plugin, p.Name)
		took := formatElapsed(p.Took)
		if p.Err != nil {
			fmt.Fprintf(w, "  FAILED %s, after %s: %s\n", at, took, oneLine(p.Err.Error()))
			continue
		}
		fmt.Fprintf(w, "  ok     %s, in %s: %s\n", at, took, p.Note)
	}
}

func keysWithRealm(s *host.Step, keys []host.Key) string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k) + realmSuffix(s.Realm(k))
	}
	return strings.Join(out, ", ")
}

func realmSuffix(r host.Realm) string {
	if r.IsRoot() {
		return ""
	}
	return "[" + r.String() + "]"
}

func toolsCommand(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List the deployment's tools with their input schemas",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, tools, err := g.inspect(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(tools)
			}
			for i, t := range tools {
				if i > 0 {
					fmt.Fprintln(g.stdout)
				}
				var schema any
				if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
					return err
				}
				pretty, err := json.MarshalIndent(schema, "  ", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%s\n  %s\n  %s\n", t.Name, t.Description, pretty)
			}
			if len(tools) == 0 {
				fmt.Fprintln(g.stdout, "no tools")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (name, description, inputSchema)")
	return cmd
}

func callCommand(g *globals) *cobra.Command {
	var workdir string
	cmd := &cobra.Command{
		Use:   "call NAME [JSON]",
		Short: "Call one tool once, as a fresh owner, and print the result",
		Long:  "call runs a single tool call with the given JSON arguments (default {}) for a new owner whose workspace is --workdir, prints the result text, and exits 1 if the result is an error. SIGINT cancels the call.",
		Example: `  dsh call bash '{"command":"ls -la"}'
  dsh call bash '{"command":"pwd"}' --workdir /tmp`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := json.RawMessage("{}")
			if len(args) == 2 {
				if !json.Valid([]byte(args[1])) {
					return usageError{fmt.Errorf("arguments %q are not valid JSON", args[1])}
				}
				raw = json.RawMessage(args[1])
			}
			if workdir == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				workdir = wd
			}
			if fi, err := os.Stat(workdir); err != nil || !fi.IsDir() {
				return usageError{fmt.Errorf("--workdir %q is not a directory", workdir)}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			h, err := g.loadHost(ctx, workdir)
			if err != nil {
				return err
			}
			owner, err := h.NewOwner(host.NewOwnerID("call"), workdir)
			if err != nil {
				return errors.Join(err, h.Close(context.WithoutCancel(ctx)))
			}
			res := h.Tools().Call(ctx, owner, args[0], raw)
			if err := h.Close(context.WithoutCancel(ctx)); err != nil {
				return err
			}
			fmt.Fprint(g.stdout, res.Text)
			if res.Text != "" && !strings.HasSuffix(res.Text, "\n") {
				fmt.Fprintln(g.stdout)
			}
			if res.IsError {
				if errors.Is(res.Err, host.ErrUnknownTool) || errors.Is(res.Err, host.ErrInvalidArguments) {
					return exitCode(exitUsage)
				}
				return exitCode(exitFailure)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&workdir, "workdir", "w", "", "the owner's workspace (default: the current directory)")
	return cmd
}

func versionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the dsh version",
		Args:  usageArgs(cobra.NoArgs),
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(g.stdout, "dsh %s\n", versionString())
		},
	}
}
