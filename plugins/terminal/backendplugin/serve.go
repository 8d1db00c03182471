package backendplugin

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"google.golang.org/grpc"

	"github.com/dshdev/dsh/internal/harden"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
)

// Serve serves the backend newBackend makes to the dsh host that started
// this executable, and returns when the host stops it; main should return
// then. Started by hand, it prints that it is a plugin and exits with
// status 1.
//
// Every session still open when the host stops the plugin, or when the
// host itself goes away without a word, is closed before Serve returns:
// a backend's processes never outlive the host for long. Started as a
// keeper (OpenKeeper), the executable serves the same backend as one
// instead, and its sessions outlive the host. The process is
// made non-dumpable first, so that its shells cannot read its memory or
// environment through /proc.
func Serve(newBackend NewBackend) {
	if IsKeeper() {
		// Started by OpenKeeper: the same backend, kept in a process that
		// outlives dsh.
		os.Exit(serveKeeper(newBackend))
	}
	// The plugin is its shells' parent: they must not read its memory or
	// environment through /proc.
	if err := harden.NotDumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "backendplugin:", err)
		os.Exit(1)
	}
	srv := newServer(newBackend)
	defer srv.stop()
	stopWatch := watchParent(srv.stop)
	defer stopWatch()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins:         plugin.PluginSet{pluginName: &grpcPlugin{server: srv}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			opts = append(opts, grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes))
			return grpc.NewServer(opts...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Info}),
	})
}

// Logger returns a logger for a backend served by Serve: JSON lines on
// stderr in the form the host reads, so that each record reaches the host's
// log at its own level, with its attributes.
func Logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				a.Key = "@timestamp"
			case slog.LevelKey:
				a.Key = "@level"
				a.Value = slog.StringValue(hclogLevel(a.Value.Any().(slog.Level)))
			case slog.MessageKey:
				a.Key = "@message"
			}
			return a
		},
	}))
}

func hclogLevel(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

// grpcPlugin is the go-plugin glue on both sides: the plugin registers the
// server, the host gets a client stub.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	server *server
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	backendpb.RegisterBackendServer(s, p.server)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return backendpb.NewBackendClient(c), nil
}
