package catalog

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/dshdev/dsh/host"
)

// expansion is a scalar written as ${VAR} or ${VAR:-default}: the loader
// expands and types it, so the schema lets it stand for any scalar.
var expansion = map[string]any{
	"type":        "string",
	"pattern":     `\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}`,
	"description": "${VAR} or ${VAR:-default}: expanded from the environment when the deployment loads",
}

// deploymentSchema is a JSON Schema (2020-12) for deployment files: a list
// of entries, groups with their children, and each plugin's config by the
// entry's name.
func (c *Catalog) deploymentSchema() ([]byte, error) {
	defs := map[string]any{
		"entries": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/entry"}},
	}
	var cases []any
	// A group holds entries; isolate belongs to groups only.
	cases = append(cases, map[string]any{
		"if":   nameIs(map[string]any{"const": host.GroupName}),
		"then": configIs(map[string]any{"$ref": "#/$defs/entries"}),
		"else": map[string]any{"not": map[string]any{"required": []string{"isolate"}}},
	})
	for _, p := range c.Plugins {
		def := "config-" + p.Name
		var cfg map[string]any
		if p.Config == nil {
			defs[def] = map[string]any{"type": "null"}
		} else {
			if err := json.Unmarshal(p.Config, &cfg); err != nil {
				return nil, fmt.Errorf("catalog: %s: %w", p.Name, err)
			}
			allowExpansions(cfg)
			defs[def] = cfg
		}
		name := map[string]any{"const": p.Name}
		if p.Executable {
			// By path: ./bin/dsh-backend-ssh, /opt/dsh/dsh-backend-ssh.
			name = map[string]any{"pattern": "/" + regexp.QuoteMeta(p.Name) + "$"}
		}
		cases = append(cases, map[string]any{"if": nameIs(name), "then": configIs(map[string]any{"$ref": "#/$defs/" + def})})
	}
	defs["entry"] = map[string]any{
		"type":                 "object",
		"required":             []string{"name"},
		"additionalProperties": false,
		"properties": map[string]any{
			"id":       map[string]any{"type": "string", "pattern": `^[^:\s]+$`, "description": "unique in its list; defaults to name"},
			"name":     map[string]any{"type": "string", "description": "a registered plugin, \"group\", or a backend executable's path (containing a /)"},
			"disabled": map[string]any{"type": "boolean", "description": "skip the entry (and a group's children)"},
			"isolate": map[string]any{
				"type":                 "object",
				"description":          "a group's private realms: service key to true, or to a realm label shared by groups",
				"additionalProperties": map[string]any{"anyOf": []any{map[string]any{"const": true}, map[string]any{"type": "string"}}},
			},
			"config": map[string]any{"description": "the plugin's config (see the config catalog), or a group's entries"},
		},
		"allOf": cases,
	}
	doc := map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$comment":    Header,
		"title":       "dsh deployment",
		"description": "A dsh deployment: the plugins to load, with their config.",
		"$ref":        "#/$defs/entries",
		"$defs":       defs,
	}
	return indentJSON(doc)
}

func nameIs(name map[string]any) map[string]any {
	return map[string]any{"required": []string{"name"}, "properties": map[string]any{"name": name}}
}

// configIs says what config must be; an empty config (null) is allowed.
func configIs(s map[string]any) map[string]any {
	return map[string]any{"properties": map[string]any{"config": map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}}}
}

// allowExpansions lets every scalar field of a reflected config schema be
// a ${VAR} expansion instead. Description and default stay on the field,
// for editors to show.
func allowExpansions(s map[string]any) {
	props, _ := s["properties"].(map[string]any)
	for name, raw := range props {
		p, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		if p["type"] == "object" {
			allowExpansions(p)
			continue
		}
		wrapped := map[string]any{}
		for _, k := range []string{"description", "default"} {
			if v, ok := p[k]; ok {
				wrapped[k] = v
				delete(p, k)
			}
		}
		wrapped["anyOf"] = []any{p, expansion}
		props[name] = wrapped
	}
}
