package schema

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"

	"github.com/dshdev/dsh/config"
)

// Reflect returns the JSON Schema of v's type (a struct or a pointer to one),
// inlined (no $ref, no $defs) with an object at the root, which is the shape
// MCP requires of a tool's inputSchema. Descriptions come from the field doc
// comments; when defaults is non-nil (a value of the same type holding the
// defaults), every non-zero field contributes its value as "default".
func Reflect(v any, defaults any) (json.RawMessage, error) {
	return reflectSchema(v, defaults, false)
}

// ReflectInput is Reflect for a tool's inputSchema: the same, except that
// the root object does not forbid other properties. Clients add keys of
// their own to every tool's arguments (Gemini CLI's wait_for_previous), and
// the host ignores keys a tool does not define; the schema says so.
func ReflectInput(v any) (json.RawMessage, error) {
	return reflectSchema(v, nil, true)
}

func reflectSchema(v any, defaults any, openRoot bool) (json.RawMessage, error) {
	r := &jsonschema.Reflector{
		ExpandedStruct: true,
		DoNotReference: true,
		Anonymous:      true,
		CommentMap:     comments,
		LookupComment:  lookupAdded,
		Mapper:         mapType,
	}
	s := r.Reflect(v)
	// "$schema" and the type's own doc comment only cost the model tokens;
	// the tool or plugin description says what the object is for.
	s.Version = ""
	s.Description = ""
	if s.Type != "object" {
		return nil, fmt.Errorf("schema: %T does not reflect to an object", v)
	}
	if defaults != nil {
		// A config is decoded over its defaults: no field has to be
		// given, whatever its tag says.
		dropRequired(s)
		addDefaults(s, reflect.ValueOf(defaults))
	}
	if openRoot {
		s.AdditionalProperties = nil
	}
	out, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("schema: marshal %T: %w", v, err)
	}
	return out, nil
}

// mapType gives the schema of the config types that are not what their Go
// kind says: an amount of bytes is a number or a string with a unit.
func mapType(t reflect.Type) *jsonschema.Schema {
	if t == reflect.TypeFor[config.Bytes]() {
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
			{Type: "integer", Minimum: "0"},
			{Type: "string", Pattern: `^\s*[0-9.]+\s*([kKmMgGtT][iI]?[bB]?|[bB])?\s*$`},
		}}
	}
	return nil
}

// dropRequired clears "required" in s and the objects within it.
func dropRequired(s *jsonschema.Schema) {
	s.Required = nil
	if s.Properties == nil {
		return
	}
	for pair := s.Properties.Oldest(); pair != nil; pair = pair.Next() {
		dropRequired(pair.Value)
	}
}

// addDefaults copies the non-zero fields of a default value into the schema,
// so the defaults live in one place: the plugin's default config.
func addDefaults(s *jsonschema.Schema, v reflect.Value) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || s.Properties == nil {
		return
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := JSONName(f)
		if name == "" {
			continue
		}
		prop, ok := s.Properties.Get(name)
		if !ok {
			continue
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			addDefaults(prop, fv)
			continue
		}
		if !fv.IsZero() && prop.Default == nil {
			prop.Default = fv.Interface()
		}
	}
}

// JSONName is the key a struct field has in JSON and YAML documents: the
// name in its json tag, or "" when the field is skipped.
func JSONName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	name := tag
	for i := range len(tag) {
		if tag[i] == ',' {
			name = tag[:i]
			break
		}
	}
	if name == "" {
		return f.Name
	}
	return name
}
