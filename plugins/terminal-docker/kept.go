package terminaldocker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/dshdev/dsh/internal/proc"
)

// The labels of a container a keeper created: which keeper (its base
// path, the same for every keeper of one backend entry), and which
// process of it.
const (
	keeperLabel        = "dsh.keeper"
	keeperProcessLabel = "dsh.keeper.process"
)

// NewKept is New for a backend that a keeper serves (see
// backendplugin.KeeperOf): keeper is the keeper's base path. The
// containers it creates carry keeper and this process's identity as
// labels, and it first removes the containers that an earlier keeper of
// the same base created and left when it died: one keeper of a base runs
// at a time, so a container labelled with another process that is gone is
// nobody's.
func NewKept(ctx context.Context, cfg *Config, log *slog.Logger, keeper string) (*Backend, error) {
	self, err := proc.IdentityOf(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("terminal-docker: this process: %w", err)
	}
	b, err := New(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	b.keeper, b.keeperProcess = keeper, labelOf(self)
	if b.cfg.Image == "" {
		return b, nil // an existing container is not dsh's to remove
	}
	if err := b.removeOrphans(ctx); err != nil {
		// A daemon that does not list now fails the first spawn too;
		// what is left stays for the next keeper.
		b.log.Warn("the containers of a keeper that died could not be removed", "err", err)
	}
	return b, nil
}

func labelOf(id proc.Identity) string {
	return strconv.Itoa(id.PID) + "@" + strconv.FormatUint(id.StartTime, 10)
}

func parseLabel(s string) (proc.Identity, bool) {
	pid, start, ok := strings.Cut(s, "@")
	if !ok {
		return proc.Identity{}, false
	}
	p, err1 := strconv.Atoi(pid)
	t, err2 := strconv.ParseUint(start, 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return proc.Identity{}, false
	}
	return proc.Identity{PID: p, StartTime: t}, true
}

// removeOrphans removes the containers of this keeper's base whose keeper
// process is gone. A container whose label does not parse is left alone.
func (b *Backend) removeOrphans(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, inspectBound)
	defer cancel()
	res, err := b.api.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", keeperLabel+"="+b.keeper),
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range res.Items {
		label := c.Labels[keeperProcessLabel]
		id, ok := parseLabel(label)
		if !ok || label == b.keeperProcess || id.Alive() {
			continue
		}
		_, err := b.api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", shortID(c.ID), err))
			continue
		}
		b.log.Info("removed the container of a keeper that died", "container", shortID(c.ID), "session", c.Labels["dsh.session"], "keeper", label)
	}
	return errors.Join(errs...)
}

// labels are a created container's.
func (b *Backend) labels(session, owner string) map[string]string {
	l := map[string]string{"dsh.session": session, "dsh.owner": owner}
	if b.keeper != "" {
		l[keeperLabel], l[keeperProcessLabel] = b.keeper, b.keeperProcess
	}
	return l
}
