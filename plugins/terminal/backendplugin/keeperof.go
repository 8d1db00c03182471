package backendplugin

import "context"

type keeperOfKey struct{}

// KeeperOf tells a NewBackend whether the backend it makes is served by a
// keeper (OpenKeeper), and which one: its base path, the keeper's
// directory and name, which every keeper of the same backend entry shares
// (one at a time). A backend that leaves things behind it outside this
// machine's processes (a container) labels them with it, so that the next
// keeper of the entry can find what a keeper that died left, and remove
// it.
func KeeperOf(ctx context.Context) (string, bool) {
	base, ok := ctx.Value(keeperOfKey{}).(string)
	return base, ok && base != ""
}

// withKeeperOf is ctx telling a NewBackend that a keeper at base serves
// it.
func withKeeperOf(ctx context.Context, base string) context.Context {
	return context.WithValue(ctx, keeperOfKey{}, base)
}
