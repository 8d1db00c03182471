package host

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Deployment is a parsed deployment document: a list of entries, some of them
// groups with child entries of their own.
type Deployment struct {
	// Source names the document in messages: a file path, or
	// "default.yaml (embedded)".
	Source string
	// File is the path the document was read from, or "" when it is not a
	// file (the embedded default). An entry that names an executable by a
	// relative path names it relative to File's directory.
	File    string
	Entries []*Entry
}

// Entry is one item of a deployment list.
type Entry struct {
	// ID is unique within its list; it defaults to Name.
	ID string
	// Path addresses the entry from the top: parent:child for nested ones.
	Path string
	// Name is a registered plugin name or "group".
	Name     string
	Disabled bool
	// Isolate maps a service key to its realm label: "" for a private realm
	// (isolate: {key: true}), otherwise a label shared by every group using it.
	Isolate map[Key]string
	// Children are a group's entries.
	Children []*Entry
	// Line is where the entry starts in Source.
	Line int

	config *yaml.Node // the raw config subtree (not for groups)
}

// IsGroup reports whether the entry is a group.
func (e *Entry) IsGroup() bool { return e.Name == GroupName }

// LookupEnv is the environment that ${VAR} expansion reads.
type LookupEnv func(name string) (string, bool)

// ParseDeployment parses a deployment document. Every problem is reported as
// a *DeploymentError naming source, line and entry. ${VAR} and
// ${VAR:-default} expand in scalar values (not in keys) using env, or the
// process environment when env is nil.
func ParseDeployment(source string, data []byte, env LookupEnv) (*Deployment, error) {
	if env == nil {
		env = os.LookupEnv
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := yamlErrorLine(err)
		return nil, &DeploymentError{File: source, Line: line, Err: errorf(ErrInvalidEntry, "malformed YAML: %s", msg)}
	}
	d := &Deployment{Source: source}
	if doc.Kind == 0 { // empty document
		return d, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return d, nil
	}
	p := &parser{source: source, env: env}
	if err := p.expand(root); err != nil {
		return nil, err
	}
	entries, err := p.list(root, "")
	if err != nil {
		return nil, err
	}
	d.Entries = entries
	return d, nil
}

// ReadDeployment reads and parses a deployment file.
func ReadDeployment(path string, env LookupEnv) (*Deployment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read deployment: %w", err)
	}
	d, err := ParseDeployment(path, data, env)
	if err != nil {
		return nil, err
	}
	d.File = path
	return d, nil
}

type parser struct {
	source string
	env    LookupEnv
}

func (p *parser) errorf(n *yaml.Node, entry string, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &DeploymentError{File: p.source, Line: line, Entry: entry, Err: errorf(ErrInvalidEntry, format, args...)}
}

func (p *parser) list(n *yaml.Node, parent string) ([]*Entry, error) {
	if n.Kind != yaml.SequenceNode {
		what := "the deployment"
		if parent != "" {
			what = "a group's config"
		}
		return nil, p.errorf(n, parent, "%s must be a list of entries, got %s", what, kindName(n))
	}
	seen := make(map[string]*Entry)
	var out []*Entry
	for _, item := range n.Content {
		e, err := p.entry(item, parent)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[e.ID]; dup {
			return nil, &DeploymentError{File: p.source, Line: item.Line, Entry: e.Path,
				Err: errorf(ErrDuplicateID, "duplicate entry id %q (first used at line %d)", e.ID, prev.Line)}
		}
		seen[e.ID] = e
		out = append(out, e)
	}
	return out, nil
}

var entryKeys = []string{"id", "name", "config", "disabled", "isolate"}

func (p *parser) entry(n *yaml.Node, parent string) (*Entry, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n, parent, "an entry must be a mapping with id and name, got %s", kindName(n))
	}
	e := &Entry{Line: n.Line}
	fields := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "id", "name", "config", "disabled", "isolate":
			fields[k.Value] = v
		default:
			return nil, p.errorf(k, parent, "unknown entry key %q (want one of %s)", k.Value, strings.Join(entryKeys, ", "))
		}
	}
	var err error
	if e.Name, err = p.str(fields["name"], parent, "name"); err != nil {
		return nil, err
	}
	if e.Name == "" {
		return nil, p.errorf(n, parent, "entry has no name")
	}
	if e.ID, err = p.str(fields["id"], parent, "id"); err != nil {
		return nil, err
	}
	if e.ID == "" {
		e.ID = e.Name
	}
	if strings.ContainsAny(e.ID, ": \t") {
		return nil, p.errorf(fields["id"], parent, "id %q must not contain ':' or spaces", e.ID)
	}
	e.Path = e.ID
	if parent != "" {
		e.Path = parent + ":" + e.ID
	}
	if v := fields["disabled"]; v != nil {
		if err := decodeScalar(v, &e.Disabled); err != nil {
			return nil, p.errorf(v, e.Path, "disabled: %v", err)
		}
	}
	if v := fields["isolate"]; v != nil {
		if e.Isolate, err = p.isolate(v, e.Path); err != nil {
			return nil, err
		}
		if !e.IsGroup() && len(e.Isolate) > 0 {
			return nil, p.errorf(v, e.Path, "isolate applies to groups only")
		}
	}
	cfg := fields["config"]
	if e.IsGroup() {
		if cfg == nil || (cfg.Kind == yaml.ScalarNode && cfg.Tag == "!!null") {
			return e, nil
		}
		if e.Children, err = p.list(cfg, e.Path); err != nil {
			return nil, err
		}
		return e, nil
	}
	e.config = cfg
	return e, nil
}

func (p *parser) str(n *yaml.Node, entry, field string) (string, error) {
	if n == nil {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errorf(n, entry, "%s must be a string, got %s", field, kindName(n))
	}
	return n.Value, nil
}

func (p *parser) isolate(n *yaml.Node, entry string) (map[Key]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n, entry, "isolate must map service keys to true or a realm label, got %s", kindName(n))
	}
	out := make(map[Key]string)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return nil, p.errorf(v, entry, "isolate.%s must be true, false or a realm label", k.Value)
		}
		switch v.ShortTag() {
		case "!!bool":
			var b bool
			if err := v.Decode(&b); err != nil {
				return nil, p.errorf(v, entry, "isolate.%s: %v", k.Value, err)
			}
			if b {
				out[Key(k.Value)] = ""
			}
		case "!!str":
			if v.Value == "" {
				return nil, p.errorf(v, entry, "isolate.%s: realm label must be non-empty", k.Value)
			}
			out[Key(k.Value)] = v.Value
		default:
			return nil, p.errorf(v, entry, "isolate.%s must be true, false or a realm label, got %s", k.Value, kindName(v))
		}
	}
	return out, nil
}

// expand replaces ${VAR} and ${VAR:-default} in every scalar value. A plain
// (unquoted) scalar is re-resolved afterwards, so `timeoutMs: ${T:-5000}`
// is an integer; a quoted one stays a string.
func (p *parser) expand(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return nil
		}
		v, err := expandEnv(n.Value, p.env)
		if err != nil {
			return p.errorf(n, "", "%v", err)
		}
		if v != n.Value {
			n.Value = v
			if n.Style == 0 { // plain and untagged: let YAML resolve the new text
				n.Tag = ""
			}
		}
	case yaml.MappingNode:
		// yaml.v3 only rejects duplicate keys when decoding into a map; a
		// node tree keeps both, and the later would silently win.
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if first, dup := seen[k.Value]; dup {
				return p.errorf(k, "", "duplicate key %q (first at line %d)", k.Value, first)
			}
			seen[k.Value] = k.Line
			if err := p.expand(n.Content[i+1]); err != nil { // values only, never keys
				return err
			}
		}
	default:
		for _, c := range n.Content {
			if err := p.expand(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// expandEnv implements ${VAR}, ${VAR:-default} (default when unset or empty)
// and $$ for a literal dollar. A $ not followed by { or $ is literal.
func expandEnv(s string, env LookupEnv) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in %q", s)
			}
			expr := s[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(expr, ":-")
			if !validEnvName(name) {
				return "", fmt.Errorf("bad variable name %q in %q", name, s)
			}
			v, ok := env(name)
			if hasDef && (!ok || v == "") {
				v = def
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return false
	}
	return true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!bool":
			return "boolean " + n.Value
		case "!!int":
			return "integer " + n.Value
		case "!!float":
			return "number " + n.Value
		default:
			return fmt.Sprintf("string %q", n.Value)
		}
	}
	return "nothing"
}

// yamlErrorLine splits a yaml.v3 error ("yaml: line 3: did not find ...")
// into its line and the rest, so malformed documents are reported like every
// other problem.
func yamlErrorLine(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return 0, msg
	}
	num, tail, ok := strings.Cut(rest, ": ")
	line, convErr := strconv.Atoi(num)
	if !ok || convErr != nil {
		return 0, msg
	}
	return line, tail
}
