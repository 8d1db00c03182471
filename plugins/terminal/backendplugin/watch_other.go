//go:build !linux

package backendplugin

// watchParent does nothing here: without pidfds the plugin relies on the
// host's go-plugin connection to learn that the host is gone.
func watchParent(func()) (cancel func()) { return func() {} }
