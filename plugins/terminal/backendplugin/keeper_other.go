//go:build !linux

package backendplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Keepers need Linux (SO_PEERCRED, pidfds, /proc): elsewhere a backend is
// never kept, and these are what the rest of the package names.

const DefaultKeep = time.Hour

func IsKeeper() bool                        { return false }
func KeeperMain()                           {}
func RegisterBuiltin(string, NewBackend)    {}
func serveKeeper(NewBackend) int            { return 1 }
func connOf(context.Context) uint64         { return 0 }
func (c *Client) KeeperPID() int            { return 0 }
func (c *Client) lostInfos() []termapi.Info { return nil }
func (c *Client) attachLost(string) termapi.Session {
	return nil
}

type KeeperOptions struct {
	Dir, Name, Path, Builtin string
	Config                   json.RawMessage
	Keep                     time.Duration
	Env                      []string
	Logger                   *slog.Logger
}

var errNoKeepers = fmt.Errorf("backendplugin: keepers need Linux: %w", ErrKeeperUnsupported)

func OpenKeeper(context.Context, KeeperOptions) (*Client, error) { return nil, errNoKeepers }
func StopKeeper(context.Context, string, string) error           { return errNoKeepers }

type keeperClient struct{}

type keeping struct{}

type kept struct{ sess termapi.Session }

func (*keeping) configureLocked(context.Context, json.RawMessage, *backendpb.ConfigureRequest) (*backendpb.ConfigureResponse, error) {
	return nil, errNoKeepers
}
func (*keeping) add(uint64, termapi.SpawnSpec, termapi.Session)        {}
func (*keeping) list(uint64) []termapi.Info                            { return nil }
func (*keeping) attach(context.Context, uint64, string) (*kept, error) { return nil, errNoKeepers }
func (*keeping) held(uint64, string) (*kept, error)                    { return nil, errNoKeepers }
func (*keeping) release(*kept, uint64)                                 {}
func (*keeping) forget(string)                                         {}
func (*keeping) send(grpc.BidiStreamingServer[backendpb.SendControl, backendpb.SendEvent], *backendpb.SendStart) error {
	return errNoKeepers
}
