//go:build linux

package proc

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// tail is stat fields 9..22 (flags .. starttime) and a few after, with
// starttime 777.
const tail = "4194560 100 0 0 0 1 2 0 0 20 0 1 0 777 1000 200 18446744073709551615"

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Stat
	}{{
		name: "plain",
		in:   "42 (bash) S 1 42 42 34816 50 " + tail + "\n",
		want: Stat{PID: 42, PPID: 1, PGRP: 42, Session: 42, TTYNr: 34816, TPGID: 50, Threads: 1, State: 'S', UTime: 1, STime: 2, StartTime: 777, Comm: "bash"},
	}, {
		name: "comm with spaces and parens",
		in:   "1 (a) b) S 0 1 1 0 -1 " + tail,
		want: Stat{PID: 1, PPID: 0, PGRP: 1, Session: 1, TTYNr: 0, TPGID: -1, Threads: 1, State: 'S', UTime: 1, STime: 2, StartTime: 777, Comm: "a) b"},
	}, {
		name: "comm that looks like fields",
		in:   "7 (x) R 1 2 3 4 5 ) Z 3 7 7 0 -1 " + tail,
		want: Stat{PID: 7, PPID: 3, PGRP: 7, Session: 7, TTYNr: 0, TPGID: -1, Threads: 1, State: 'Z', UTime: 1, STime: 2, StartTime: 777, Comm: "x) R 1 2 3 4 5 "},
	}, {
		name: "empty comm",
		in:   "9 () D 2 0 0 0 -1 " + tail,
		want: Stat{PID: 9, PPID: 2, State: 'D', TPGID: -1, Threads: 1, UTime: 1, STime: 2, StartTime: 777},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.in))
			if err != nil {
				t.Fatalf("ParseStat: %v", err)
			}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseStatRejectsMalformed(t *testing.T) {
	fields := strings.Fields("S 1 42 42 34816 50 " + tail)
	withField := func(i int, v string) string {
		f := append([]string(nil), fields...)
		f[i] = v
		return "42 (bash) " + strings.Join(f, " ")
	}
	for name, in := range map[string]string{
		"empty":              "",
		"bad":                "bad",
		"no fields":          "1 () ",
		"state only":         "1 () S",
		"no space after )":   "1 ()S 1 1 1 0 -1 " + tail,
		"two-char state":     withField(0, "SS"),
		"pid not a number":   "x (bash) S 1 1 1 0 -1 " + tail,
		"ppid not a number":  withField(1, "one"),
		"pgrp not a number":  withField(2, "1.5"),
		"session not number": withField(3, "s1"),
		"tty_nr not number":  withField(4, "tty"),
		"tpgid not a number": withField(5, "--1"),
		"threads not number": withField(17, "many"),
		"starttime negative": withField(19, "-1"),
		"no starttime":       "42 (bash) " + strings.Join(fields[:19], " "),
		"paren order":        "42 )bash( S 1 1 1 0 -1 " + tail,
	} {
		t.Run(name, func(t *testing.T) {
			if st, err := ParseStat([]byte(in)); !errors.Is(err, ErrMalformedStat) {
				t.Errorf("ParseStat(%q) = %+v, %v; want ErrMalformedStat", in, st, err)
			}
		})
	}
}

func TestReadStat(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.PPID != os.Getppid() || st.StartTime == 0 || st.Dead() {
		t.Errorf("ReadStat(self) = %+v", st)
	}
	if _, err := ReadStat(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadStat of a pid that cannot exist: %v, want fs.ErrNotExist", err)
	}
}

func TestParseSchedstat(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "323449 17 1\n", want: 323449},
		{in: "0 0 0", want: 0},
		{in: "9223372036854775807 1 1", want: 1<<63 - 1},
		{in: "", wantErr: true},
		{in: "-1 0 0", wantErr: true},
		{in: "12x 0 0", wantErr: true},
		{in: "18446744073709551615 0 0", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseSchedstat([]byte(tt.in))
		if tt.wantErr {
			if !errors.Is(err, ErrMalformedStat) {
				t.Errorf("parseSchedstat(%q) = %v, %v; want ErrMalformedStat", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseSchedstat(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// TestRunTimeGrows: a process that spins shows the time it runs.
func TestRunTimeGrows(t *testing.T) {
	spin := exec.Command("sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		spin.Process.Kill()
		spin.Wait()
	})
	before, err := RunTime(spin.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for {
		now, err := RunTime(spin.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if now > before {
			return
		}
		runtime.Gosched()
	}
}

func TestRunTimeOfMissingProcess(t *testing.T) {
	if _, err := RunTime(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("RunTime of a missing pid: %v, want fs.ErrNotExist", err)
	}
}
