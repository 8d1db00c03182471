package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// argSchema is the subset of JSON Schema that tool arguments use: what
// internal/schema reflects from a Go struct. compileSchema rejects any other
// keyword, so a tool can never rely on a check that silently does not run.
type argSchema struct {
	Type                 string                `json:"type"`
	Description          string                `json:"description"`
	Title                string                `json:"title"`
	Properties           map[string]*argSchema `json:"properties"`
	Required             []string              `json:"required"`
	AdditionalProperties *bool                 `json:"additionalProperties"`
	Items                *argSchema            `json:"items"`
	Enum                 []any                 `json:"enum"`
	Default              any                   `json:"default"`
	Examples             []any                 `json:"examples"`
	MinLength            *int                  `json:"minLength"`
	MaxLength            *int                  `json:"maxLength"`
	Pattern              string                `json:"pattern"`
	Minimum              *float64              `json:"minimum"`
	Maximum              *float64              `json:"maximum"`
	MinItems             *int                  `json:"minItems"`
	MaxItems             *int                  `json:"maxItems"`

	pattern *regexp.Regexp
}

var knownKeywords = []string{
	"type", "description", "title", "properties", "required", "additionalProperties",
	"items", "enum", "default", "examples", "minLength", "maxLength", "pattern",
	"minimum", "maximum", "minItems", "maxItems",
}

func compileSchema(raw json.RawMessage) (*argSchema, error) {
	var s argSchema
	if err := compileInto(raw, &s, "schema"); err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("input schema must have type object, got %q", s.Type)
	}
	return &s, nil
}

func compileInto(raw json.RawMessage, s *argSchema, at string) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return fmt.Errorf("%s: %w", at, err)
	}
	for k := range keys {
		if !slices.Contains(knownKeywords, k) {
			return fmt.Errorf("%s: unsupported keyword %q", at, k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(s); err != nil {
		return fmt.Errorf("%s: %w", at, err)
	}
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return fmt.Errorf("%s: pattern: %w", at, err)
		}
		s.pattern = re
	}
	if props, ok := keys["properties"]; ok {
		var rawProps map[string]json.RawMessage
		if err := json.Unmarshal(props, &rawProps); err != nil {
			return fmt.Errorf("%s.properties: %w", at, err)
		}
		s.Properties = make(map[string]*argSchema, len(rawProps))
		for name, p := range rawProps {
			sub := new(argSchema)
			if err := compileInto(p, sub, at+".properties."+name); err != nil {
				return err
			}
			s.Properties[name] = sub
		}
	}
	if items, ok := keys["items"]; ok {
		s.Items = new(argSchema)
		if err := compileInto(items, s.Items, at+".items"); err != nil {
			return err
		}
	}
	return nil
}

// validate checks a decoded JSON value (from encoding/json with UseNumber)
// and returns the first problem, phrased for the model.
func (s *argSchema) validate(v any, path string) error {
	name := path
	if name == "" {
		name = "arguments"
	} else {
		name = fmt.Sprintf("%q", path)
	}
	if s.Type != "" && !hasType(v, s.Type) {
		return fmt.Errorf("%s must be %s, got %s", name, article(s.Type), describe(v))
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return jsonEqual(e, v) }) {
		return fmt.Errorf("%s must be one of %s, got %s", name, jsonText(s.Enum), describe(v))
	}
	switch x := v.(type) {
	case map[string]any:
		// Unknown keys first: a misspelt key explains the missing one.
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			sub, ok := s.Properties[k]
			if !ok {
				// The arguments' own keys are open (see unknownKeys);
				// nested objects keep what their schema says.
				if path != "" && s.AdditionalProperties != nil && !*s.AdditionalProperties {
					return fmt.Errorf("unknown property %q", joinArg(path, k))
				}
				continue
			}
			if err := sub.validate(x[k], joinArg(path, k)); err != nil {
				return err
			}
		}
		for _, req := range s.Required {
			if _, ok := x[req]; !ok {
				return fmt.Errorf("missing required property %q", joinArg(path, req))
			}
		}
	case []any:
		if s.MinItems != nil && len(x) < *s.MinItems {
			return fmt.Errorf("%s must have at least %d items", name, *s.MinItems)
		}
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			return fmt.Errorf("%s must have at most %d items", name, *s.MaxItems)
		}
		if s.Items != nil {
			for i, item := range x {
				if err := s.Items.validate(item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case string:
		n := utf8.RuneCountInString(x)
		if s.MinLength != nil && n < *s.MinLength {
			return fmt.Errorf("%s must be at least %d characters long", name, *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return fmt.Errorf("%s must be at most %d characters long", name, *s.MaxLength)
		}
		if s.pattern != nil && !s.pattern.MatchString(x) {
			return fmt.Errorf("%s must match the pattern %s", name, s.Pattern)
		}
	case json.Number:
		f, _ := x.Float64()
		if s.Minimum != nil && f < *s.Minimum {
			return fmt.Errorf("%s must be at least %v", name, *s.Minimum)
		}
		if s.Maximum != nil && f > *s.Maximum {
			return fmt.Errorf("%s must be at most %v", name, *s.Maximum)
		}
	}
	return nil
}

func joinArg(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		// Written as an integer, so it decodes into a Go int (2.0 would not).
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := strconv.ParseInt(string(n), 10, 64)
		return err == nil
	}
	return false
}

func article(t string) string {
	switch t {
	case "object", "array", "integer":
		return "an " + t
	}
	return "a " + t
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case json.Number:
		return "number " + string(x)
	case string:
		if len(x) > 40 {
			return "a string"
		}
		return fmt.Sprintf("string %q", x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func jsonEqual(a, b any) bool { return jsonText(a) == jsonText(b) }

func jsonText(v any) string {
	out, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(out)
}

// decodeArgs parses raw tool arguments; an absent body means {}.
func decodeArgs(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("arguments are not valid JSON: trailing data")
	}
	return v, nil
}

// unknownKeys lists, sorted, the top-level keys of the arguments v that the
// schema does not define. A tool ignores them: clients add keys of their
// own to every tool (Gemini CLI's wait_for_previous), and rejecting them
// would fail every call.
func (s *argSchema) unknownKeys(v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var out []string
	for k := range m {
		if _, defined := s.Properties[k]; !defined {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// quotedList is "property \"a\"" or "properties \"a\", \"b\"".
func quotedList(one, many string, items []string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = strconv.Quote(it)
	}
	if len(q) == 1 {
		return one + " " + q[0]
	}
	return many + " " + strings.Join(q, ", ")
}
