package backendkit

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// Readers get the bytes in order from their own positions; a reader that
// fell behind the window resumes at its start; the end is io.EOF.
func TestRaw(t *testing.T) {
	r := NewRaw(8)
	ctx := t.Context()
	r.Write([]byte("abc"))
	r.Write([]byte("def"))
	if c, err := r.Read(ctx, 0); err != nil || c.Pos != 0 || string(c.Data) != "abcdef" {
		t.Fatalf("Read(0) = %d %q %v", c.Pos, c.Data, err)
	}
	if c, _ := r.Read(ctx, 4); c.Pos != 4 || string(c.Data) != "ef" || c.End() != 6 {
		t.Fatalf("Read(4) = %d %q", c.Pos, c.Data)
	}
	r.Write([]byte("ghijk")) // wraps: the window now holds "defghijk"
	if c, _ := r.Read(ctx, 0); c.Pos != 3 || string(c.Data) != "defghijk" {
		t.Fatalf("a reader behind the window: %d %q, want 3 defghijk", c.Pos, c.Data)
	}
	r.Write([]byte("0123456789")) // longer than the window
	if c, _ := r.Read(ctx, 11); c.Pos != 13 || string(c.Data) != "23456789" {
		t.Fatalf("after a long write: %d %q, want 13 23456789", c.Pos, c.Data)
	}

	got := make(chan string, 1)
	go func() {
		c, _ := r.Read(ctx, 21)
		got <- string(c.Data)
	}()
	r.Write([]byte("!"))
	select {
	case s := <-got:
		if s != "!" {
			t.Fatalf("a waiting reader got %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a waiting reader was not woken")
	}
	r.End()
	if c, err := r.Read(ctx, 22); !errors.Is(err, io.EOF) || c.Pos != 22 {
		t.Fatalf("after End: %d %v, want io.EOF at 22", c.Pos, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	r2 := NewRaw(8)
	if _, err := r2.Read(cctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("a read whose context ended: %v", err)
	}
}
