package backendkit

import "strings"

// SafeName maps a session id to a name that is safe as one path element,
// a cgroup's or a container's name: letters, digits, '-', '_' and '.' are
// kept, anything else becomes '_', and so do the dots of "." and "..".
func SafeName(id string) string {
	switch id {
	case "", ".", "..":
		return strings.Repeat("_", max(len(id), 1))
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, id)
}
