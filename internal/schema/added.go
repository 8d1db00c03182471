package schema

import (
	"maps"
	"reflect"
	"sync"
)

// added holds doc comments registered at run time (AddComments): those of
// packages outside this module, which the generated comments map cannot
// know.
var added struct {
	mu sync.RWMutex
	m  map[string]string
}

// AddComments registers doc comments keyed like comments ("pkgpath.Type",
// "pkgpath.Type.Field"; "main." for a program's own package). A later
// registration of a key replaces an earlier one.
func AddComments(m map[string]string) {
	added.mu.Lock()
	defer added.mu.Unlock()
	if added.m == nil {
		added.m = make(map[string]string, len(m))
	}
	maps.Copy(added.m, m)
}

// lookupAdded is the Reflector's LookupComment: the registered comment of
// type t (name "") or of its field name.
func lookupAdded(t reflect.Type, name string) string {
	key := t.PkgPath() + "." + t.Name()
	if name != "" {
		key += "." + name
	}
	added.mu.RLock()
	defer added.mu.RUnlock()
	return added.m[key]
}
