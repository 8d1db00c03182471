package mcpfront

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestReadLine(t *testing.T) {
	const max = 10
	input := "short\r\n" + strings.Repeat("x", max) + "\n" + strings.Repeat("y", max+1) + "\n  padded  \nlast"
	r := bufio.NewReaderSize(strings.NewReader(input), 16)
	want := []struct {
		line    string
		tooLong bool
	}{{"short", false}, {strings.Repeat("x", max), false}, {"", true}, {"padded", false}, {"last", false}}
	for i, w := range want {
		line, tooLong, err := readLine(r, max)
		if string(line) != w.line || tooLong != w.tooLong {
			t.Errorf("line %d = %q (too long %v), want %q (%v)", i, line, tooLong, w.line, w.tooLong)
		}
		if i == len(want)-1 && err != io.EOF {
			t.Errorf("last line: err %v, want io.EOF", err)
		}
	}
}

func TestValidID(t *testing.T) {
	for raw, ok := range map[string]bool{`1`: true, `"a"`: true, `-7`: true, `1.5`: false, `{}`: false, `[1]`: false, `true`: false, `null`: false} {
		if got := validID(json.RawMessage(raw)) != nil; got != ok {
			t.Errorf("validID(%s) = %v, want %v", raw, got, ok)
		}
	}
}
