package emulator_test

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/plugins/terminal/emulator"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newScreen(t *testing.T, rows, cols int) *emulator.Screen {
	t.Helper()
	s := emulator.New(termapi.Size{Rows: rows, Cols: cols}, 1<<16)
	t.Cleanup(s.Close)
	return s
}

// feed writes each piece separately: a sequence may be split anywhere.
func feed(s *emulator.Screen, pieces ...string) {
	for _, p := range pieces {
		s.Write([]byte(p))
	}
}

func TestLinesCollapseRedraws(t *testing.T) {
	tests := []struct {
		name          string
		in            []string
		lines, partly string
	}{
		{"progress bar", []string{"get 10%\rget 50%\rget 100%\n$ "}, "get 100%\n", "$ "},
		{"colours and titles", []string{"\x1b]0;title\x07\x1b[31mred\x1b[0m\n"}, "red\n", ""},
		{"erase line", []string{"downloading\r\x1b[Kdone\n"}, "done\n", ""},
		{"crlf split", []string{"a\r", "\nb\r\n"}, "a\nb\n", ""},
		{"prompt", []string{">>> "}, "", ">>> "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScreen(t, 24, 80)
			feed(s, tc.in...)
			lines, partial, dropped := s.Lines()
			if lines != tc.lines || partial != tc.partly || dropped {
				t.Fatalf("Lines() = %q, %q, %v; want %q, %q, false", lines, partial, dropped, tc.lines, tc.partly)
			}
			if again, _, _ := s.Lines(); again != "" {
				t.Fatalf("second Lines() = %q, want nothing new", again)
			}
		})
	}
}

// An alternate-screen program (what vim writes, in pieces split inside
// its sequences) shows as a screen, and none of it as lines; its screen
// goes when it leaves, and the main screen's lines go on.
func TestAltScreen(t *testing.T) {
	for _, split := range []int{0, 1, 3, 5, 7} {
		s := newScreen(t, 5, 20)
		enter := "$ vim f\r\n\x1b[?1049h\x1b[?1h\x1b=\x1b[H\x1b[2J"
		body := "hello\r\n~\r\n~\x1b[5;1H\"f\" 1L\x1b[1;3H"
		if split > 0 && split < len(enter) {
			feed(s, enter[:len(enter)-split], enter[len(enter)-split:], body)
		} else {
			feed(s, enter, body)
		}
		if !s.AltScreen() || !s.CursorKeys() {
			t.Fatalf("split %d: alt %v, cursor keys %v; want both", split, s.AltScreen(), s.CursorKeys())
		}
		snap := s.Snapshot()
		want := []string{"hello", "~", "~", "", `"f" 1L`}
		if !slices.Equal(snap.Rows, want) || snap.Row != 1 || snap.Col != 3 || !slices.Equal(snap.Changed, []int{1, 2, 3, 4, 5}) {
			t.Fatalf("split %d: snapshot %+v, want rows %q, cursor 1,3, all changed", split, snap, want)
		}
		lines, partial, _ := s.Lines()
		if lines != "$ vim f\n" || partial != "" {
			t.Fatalf("split %d: lines %q, %q; want only what came before the alternate screen", split, lines, partial)
		}
		feed(s, "\x1b[2;1Hx")
		if snap := s.Snapshot(); !slices.Equal(snap.Changed, []int{2}) || snap.Rows[1] != "x" {
			t.Fatalf("split %d: after one edit: %+v, want row 2 changed to x", split, snap)
		}
		feed(s, "\x1b[?1l\x1b>\x1b[?1049l", "saved\r\n")
		if s.AltScreen() || s.CursorKeys() {
			t.Fatalf("split %d: still alt %v, cursor keys %v after leaving", split, s.AltScreen(), s.CursorKeys())
		}
		if lines, _, _ := s.Lines(); lines != "saved\n" {
			t.Fatalf("split %d: lines after the program left = %q, want %q", split, lines, "saved\n")
		}
		if text := s.Text(); !strings.Contains(text, "saved") || strings.Contains(text, "hello") {
			t.Fatalf("split %d: main screen after leaving = %q", split, text)
		}
	}
}

// Queries a program makes of its terminal are answered into a pipe that
// nothing reads but the drain: they must never block the emulator.
func TestQueriesDoNotBlock(t *testing.T) {
	s := newScreen(t, 24, 80)
	for range 1000 {
		feed(s, "\x1b[6n\x1b[c\x1b[>c\x1b[?1049h\x1b[?1049l")
	}
}

func TestWideAndResize(t *testing.T) {
	s := newScreen(t, 3, 10)
	feed(s, "\x1b[?1049h中文ab")
	if snap := s.Snapshot(); snap.Rows[0] != "中文ab" || snap.Col != 7 {
		t.Fatalf("wide characters: %+v", snap)
	}
	s.Resize(termapi.Size{Rows: 4, Cols: 12})
	if snap := s.Snapshot(); snap.Size != (termapi.Size{Rows: 4, Cols: 12}) || len(snap.Changed) != 4 {
		t.Fatalf("after resize: %+v, want 4x12 with every row changed", snap)
	}
}
