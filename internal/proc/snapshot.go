//go:build linux

package proc

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
)

// ErrNoProcfs reports that /proc is not mounted or shows no processes (our
// own process is always listed where procfs works).
var ErrNoProcfs = errors.New("procfs unavailable")

// Snapshot is one walk of /proc: the stat of every process at (nearly) one
// moment. Every query for that moment reuses it instead of walking again.
// A Snapshot is immutable and safe for concurrent use.
//
// The zero Snapshot holds no processes; its WaitingOnTerminal probes only a
// group's leader.
type Snapshot struct {
	stats []Stat      // sorted by pid
	index map[int]int // pid → position in stats

	treeOnce sync.Once
	children map[int][]int // ppid → child pids, ascending
	sessions map[int][]int // sid → member pids, ascending
}

// Scan walks /proc once. Processes that exit during the walk are left out.
func Scan() (*Snapshot, error) {
	names, err := procEntries()
	if err != nil {
		return nil, err
	}
	stats := make([]Stat, 0, len(names))
	buf := make([]byte, statBufSize)
	for _, name := range names {
		pid, ok := parsePID(name)
		if !ok {
			continue
		}
		data, err := readProcFile(pidPath(pid, "stat"), buf)
		if err != nil {
			continue
		}
		st, err := ParseStat(data)
		if err != nil {
			continue
		}
		stats = append(stats, st)
	}
	if len(stats) == 0 {
		return nil, ErrNoProcfs
	}
	return newSnapshot(stats), nil
}

func newSnapshot(stats []Stat) *Snapshot {
	slices.SortFunc(stats, func(a, b Stat) int { return a.PID - b.PID })
	s := &Snapshot{stats: stats, index: make(map[int]int, len(stats))}
	for i, st := range stats {
		s.index[st.PID] = i
	}
	return s
}

// procEntries lists /proc.
func procEntries() ([]string, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoProcfs, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoProcfs, err)
	}
	return names, nil
}

// parsePID accepts the all-digit names of /proc entries.
func parsePID(name string) (int, bool) {
	if name == "" || name[0] < '1' || name[0] > '9' {
		return 0, false
	}
	pid, err := strconv.Atoi(name)
	return pid, err == nil && pid > 0
}

// Len is the number of processes in the snapshot.
func (s *Snapshot) Len() int { return len(s.stats) }

// Get returns the stat of pid as of the snapshot.
func (s *Snapshot) Get(pid int) (Stat, bool) {
	i, ok := s.index[pid]
	if !ok {
		return Stat{}, false
	}
	return s.stats[i], true
}

// Descendants returns every process below root, children before their
// parents, siblings in pid order; root itself is not included. The parent
// links come from stats read at slightly different instants, so they may
// contain a cycle after a reparenting race: each pid is visited once.
func (s *Snapshot) Descendants(root int) []Stat {
	s.buildTree()
	var out []Stat
	visited := map[int]bool{root: true}
	var walk func(pid int)
	walk = func(pid int) {
		for _, c := range s.children[pid] {
			if visited[c] {
				continue
			}
			visited[c] = true
			walk(c)
			out = append(out, s.stats[s.index[c]])
		}
	}
	walk(root)
	return out
}

// Session returns the members of session sid in pid order.
func (s *Snapshot) Session(sid int) []Stat {
	s.buildTree()
	return s.collect(s.sessions[sid])
}

// Group returns the members of process group pgid in pid order.
func (s *Snapshot) Group(pgid int) []Stat {
	var out []Stat
	for _, st := range s.stats {
		if st.PGRP == pgid {
			out = append(out, st)
		}
	}
	return out
}

func (s *Snapshot) collect(pids []int) []Stat {
	out := make([]Stat, 0, len(pids))
	for _, pid := range pids {
		out = append(out, s.stats[s.index[pid]])
	}
	return out
}

func (s *Snapshot) buildTree() {
	s.treeOnce.Do(func() {
		s.children = make(map[int][]int)
		s.sessions = make(map[int][]int)
		for _, st := range s.stats {
			s.children[st.PPID] = append(s.children[st.PPID], st.PID)
			s.sessions[st.Session] = append(s.sessions[st.Session], st.PID)
		}
	})
}
