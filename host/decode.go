package host

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/dshdev/dsh/internal/schema"
)

// decodeError is a strict-decoding failure at a node.
type decodeError struct {
	line  int
	field string // dotted key path; "" for the config as a whole
	msg   string
}

func (e *decodeError) Error() string {
	if e.field == "" {
		return e.msg
	}
	return e.field + ": " + e.msg
}

// decodeStrict decodes n into the value v points to, on top of what v
// already holds (the defaults). Unlike yaml.v3's Node.Decode it rejects
// unknown keys, and it reports the line and key path of every failure. Keys
// are the struct fields' json tags, the one naming the schemas also use.
func decodeStrict(n *yaml.Node, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("host: decode target %T is not a non-nil pointer", v)
	}
	return decodeValue(n, rv.Elem(), "")
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

func decodeValue(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // keep the default
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decodeValue(n, v.Elem(), path)
	}
	if reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		if n.Kind != yaml.ScalarNode {
			return &decodeError{n.Line, path, "expected a string, got " + kindName(n)}
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			return &decodeError{n.Line, path, err.Error()}
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		return decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return &decodeError{n.Line, path, "expected a list, got " + kindName(n)}
		}
		out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := decodeValue(item, out.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(out)
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return &decodeError{n.Line, path, "expected a mapping, got " + kindName(n)}
		}
		if v.Type().Key().Kind() != reflect.String {
			return &decodeError{n.Line, path, "unsupported map key type " + v.Type().Key().String()}
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			elem := reflect.New(v.Type().Elem()).Elem()
			if err := decodeValue(val, elem, joinPath(path, k.Value)); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
		}
		return nil
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			return &decodeError{n.Line, path, err.Error()}
		}
		v.Set(reflect.ValueOf(&x).Elem())
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return &decodeError{n.Line, path, "expected " + wantName(v.Kind()) + ", got " + kindName(n)}
	}
	return decodeScalarValue(n, v, path)
}

func decodeStruct(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		return &decodeError{n.Line, path, "expected a mapping, got " + kindName(n)}
	}
	fields := structFields(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		idx, ok := fields[k.Value]
		if !ok {
			known := make([]string, 0, len(fields))
			for name := range fields {
				known = append(known, name)
			}
			slices.Sort(known)
			return &decodeError{k.Line, "", fmt.Sprintf("unknown config key %q (known keys: %s)", joinPath(path, k.Value), strings.Join(known, ", "))}
		}
		if err := decodeValue(val, v.FieldByIndex(idx), joinPath(path, k.Value)); err != nil {
			return err
		}
	}
	return nil
}

// structFields maps document keys to field indexes, following embedded
// structs the way encoding/json does.
func structFields(t reflect.Type) map[string][]int {
	out := make(map[string][]int)
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			for name, idx := range structFields(f.Type) {
				out[name] = append([]int{i}, idx...)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name := schema.JSONName(f); name != "" {
			out[name] = []int{i}
		}
	}
	return out
}

func decodeScalarValue(n *yaml.Node, v reflect.Value, path string) error {
	tag := n.ShortTag()
	bad := func() error {
		return &decodeError{n.Line, path, "expected " + wantName(v.Kind()) + ", got " + kindName(n)}
	}
	switch v.Kind() {
	case reflect.String:
		// Any scalar is acceptable text: `description: 42` means "42".
		v.SetString(n.Value)
	case reflect.Bool:
		if tag != "!!bool" {
			return bad()
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			return bad()
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if tag != "!!int" {
			return bad()
		}
		var i int64
		if err := n.Decode(&i); err != nil || v.OverflowInt(i) {
			return &decodeError{n.Line, path, fmt.Sprintf("integer %s is out of range", n.Value)}
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if tag != "!!int" {
			return bad()
		}
		var i uint64
		if err := n.Decode(&i); err != nil || v.OverflowUint(i) {
			return &decodeError{n.Line, path, fmt.Sprintf("integer %s is out of range", n.Value)}
		}
		v.SetUint(i)
	case reflect.Float32, reflect.Float64:
		if tag != "!!int" && tag != "!!float" {
			return bad()
		}
		var f float64
		if err := n.Decode(&f); err != nil || v.OverflowFloat(f) || math.IsNaN(f) {
			return &decodeError{n.Line, path, fmt.Sprintf("number %s is out of range", n.Value)}
		}
		v.SetFloat(f)
	default:
		return &decodeError{n.Line, path, "unsupported config field type " + v.Type().String()}
	}
	return nil
}

// decodeScalar decodes a scalar node into a bool, string or integer target.
func decodeScalar(n *yaml.Node, target any) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a scalar, got %s", kindName(n))
	}
	if err := decodeScalarValue(n, reflect.ValueOf(target).Elem(), ""); err != nil {
		return fmt.Errorf("%s", err.(*decodeError).msg)
	}
	return nil
}

func wantName(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a string"
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldLine finds the line where a dotted key path is set inside a config
// node, falling back to the closest enclosing node that exists.
func fieldLine(n *yaml.Node, path string) int {
	if n == nil {
		return 0
	}
	line := n.Line
	for _, key := range strings.Split(path, ".") {
		if n.Kind != yaml.MappingNode {
			break
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				n, line, found = n.Content[i+1], n.Content[i].Line, true
				break
			}
		}
		if !found {
			break
		}
	}
	return line
}
