//go:build !linux

package mcpfront

import "io"

// writerGone never reports a client gone where poll(2)'s POLLERR on a
// pipe's write end is not known to mean it.
func writerGone(io.Writer) (gone <-chan struct{}, stop func()) { return nil, func() {} }

// unreadOutput knows nothing of what the reader has read.
func unreadOutput(io.Writer) (n int, ok bool) { return 0, false }
