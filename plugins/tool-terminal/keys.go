package terminaltool

import (
	"fmt"
	"strings"
)

// keyBytes are the bytes a terminal sends for each named key in its normal
// mode. Cursor keys are in cursorKeys: they change with the program's
// DECCKM mode.
var keyBytes = map[string]string{
	"enter":     "\r",
	"tab":       "\t",
	"escape":    "\x1b",
	"esc":       "\x1b",
	"backspace": "\x7f",
	"space":     " ",
	"delete":    "\x1b[3~",
	"insert":    "\x1b[2~",
	"pageup":    "\x1b[5~",
	"pagedown":  "\x1b[6~",
	"f1":        "\x1bOP",
	"f2":        "\x1bOQ",
	"f3":        "\x1bOR",
	"f4":        "\x1bOS",
	"f5":        "\x1b[15~",
	"f6":        "\x1b[17~",
	"f7":        "\x1b[18~",
	"f8":        "\x1b[19~",
	"f9":        "\x1b[20~",
	"f10":       "\x1b[21~",
	"f11":       "\x1b[23~",
	"f12":       "\x1b[24~",
}

// cursorKeys are the final bytes of the cursor keys: ESC [ X normally, ESC
// O X once the program asked for application cursor keys (vim, less,
// htop do).
var cursorKeys = map[string]byte{
	"up": 'A', "down": 'B', "right": 'C', "left": 'D', "home": 'H', "end": 'F',
}

// encodeKeys turns key names into the bytes a terminal sends for them:
// Enter, Tab, Escape, Backspace, the cursor keys, Home, End, PageUp,
// PageDown, F1-F12, and C-a to C-z (also C-[, C-\, C-], C-@ and C-?); names
// are case-insensitive. appCursor is the program's DECCKM mode.
func encodeKeys(names []string, appCursor bool) (string, error) {
	var b strings.Builder
	for _, name := range names {
		seq, err := encodeKey(name, appCursor)
		if err != nil {
			return "", err
		}
		b.WriteString(seq)
	}
	return b.String(), nil
}

func encodeKey(name string, appCursor bool) (string, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	if seq, ok := keyBytes[key]; ok {
		return seq, nil
	}
	if final, ok := cursorKeys[key]; ok {
		if appCursor {
			return "\x1bO" + string(final), nil
		}
		return "\x1b[" + string(final), nil
	}
	if rest, ok := strings.CutPrefix(key, "c-"); ok && len(rest) == 1 {
		switch c := rest[0]; {
		case c >= 'a' && c <= 'z':
			return string(rune(c - 'a' + 1)), nil
		case c == '@' || c == ' ':
			return "\x00", nil
		case c == '[':
			return "\x1b", nil
		case c == '\\':
			return "\x1c", nil
		case c == ']':
			return "\x1d", nil
		case c == '?':
			return "\x7f", nil
		}
	}
	return "", fmt.Errorf("unknown key %q: use Enter, Tab, Escape, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, F1-F12 or C-a..C-z", name)
}
