package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/dshdev/dsh/deployments"
	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/catalog"
	"github.com/dshdev/dsh/internal/mcpfront"
	_ "github.com/dshdev/dsh/plugins/standard"
)

func build(t *testing.T) map[string][]byte {
	t.Helper()
	c, err := catalog.Build(t.Context(), host.DefaultRegistry())
	if err != nil {
		t.Fatal(err)
	}
	files, err := c.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestCatalogsUpToDate: the committed files are what the code generates
// now; a changed config comment or default without go generate fails here.
func TestCatalogsUpToDate(t *testing.T) {
	for name, want := range build(t) {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v (run: go generate ./catalog)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale; run: go generate ./catalog", name)
		}
	}
}

// TestToolCatalogIsWhatMCPLists: the catalog's tools are the ones a client
// gets from tools/list, name, description and input schema alike.
func TestToolCatalogIsWhatMCPLists(t *testing.T) {
	d, err := host.ParseDeployment(deployments.DefaultName, deployments.Default, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	front := mcpfront.New(h, mcpfront.Options{Workdir: t.TempDir()})
	defer front.Close(context.Background())
	ct, st := mcp.NewInMemoryTransports()
	go front.Serve(t.Context(), st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "catalog-test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	listed, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("tool-catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := canonical(t, data), canonical(t, listed.Tools); !reflect.DeepEqual(got, want) {
		t.Fatalf("tool-catalog.json:\n%v\ntools/list:\n%v", got, want)
	}
}

func canonical(t *testing.T, v any) any {
	t.Helper()
	data, ok := v.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

var schemaLine = regexp.MustCompile(`^# yaml-language-server: \$schema=\.\./catalog/deployment\.schema\.json\n`)

// TestDeploymentsValidate: every shipped deployment starts with the line
// that points editors at the schema, and validates against it with a JSON
// Schema validator; broken ones do not.
func TestDeploymentsValidate(t *testing.T) {
	rs := resolvedSchema(t)
	files, err := filepath.Glob("../deployments/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no deployments (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !schemaLine.Match(data) {
			t.Errorf("%s does not start with the yaml-language-server schema line", f)
		}
		if err := rs.Validate(yamlValue(t, data)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, bad := range []string{
		"- id: bash\n  name: tool-bash-persistent\n  config: {timeoutMs: soon}\n",
		"- id: bash\n  name: tool-bash-persistent\n  config: {timeoutAction: kill}\n",
		"- id: bash\n  name: tool-bash-persistent\n  config: {timeoutMS: 5}\n",
		"- id: t\n  name: terminal-bash\n  isolate: {terminals: true}\n",
		"- id: t\n  name: terminal-bash\n  colour: red\n",
		"- name: ./bin/dsh-backend-ssh\n  config: {port: \"22\"}\n",
		"- name: group\n  config:\n    - name: terminal-bash\n      config: {rows: true}\n",
	} {
		if err := rs.Validate(yamlValue(t, []byte(bad))); err == nil {
			t.Errorf("the schema accepts:\n%s", bad)
		}
	}
	for _, good := range []string{
		"- id: bash\n  name: tool-bash-persistent\n  config: {timeoutMs: \"${T:-5000}\", timeoutAction: background}\n",
		"- name: group\n  isolate: {terminals: true}\n  config:\n    - name: terminal\n    - name: terminal-bash\n      config: {env: {inherit: core, set: {CI: \"1\"}}}\n",
		"- name: ./bin/dsh-backend-ssh\n  config: {host: example.org, port: 2222}\n",
	} {
		if err := rs.Validate(yamlValue(t, []byte(good))); err != nil {
			t.Errorf("the schema refuses:\n%s\n%v", good, err)
		}
	}
}

func resolvedSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	data, err := os.ReadFile("deployment.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// yamlValue decodes a YAML document into the values JSON would give.
func yamlValue(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(js, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
