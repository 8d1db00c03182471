package schema

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestCommentsUpToDate fails when a doc comment changed without
// `go generate ./internal/schema` being run.
func TestCommentsUpToDate(t *testing.T) {
	want, err := GenerateComments("../..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("comments_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("internal/schema/comments_gen.go is stale; run: go generate ./internal/schema")
	}
}

// Sample is a struct for the reflection tests.
type sample struct {
	Name  string `json:"name" jsonschema:"minLength=1"`
	Count int    `json:"count,omitempty"`
	Skip  string `json:"-"`
}

func TestReflect(t *testing.T) {
	raw, err := Reflect(&sample{}, &sample{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	// With defaults it is a config's schema: nothing is required.
	want := `{"additionalProperties":false,"properties":{"count":{"default":3,"type":"integer"},"name":{"minLength":1,"type":"string"}},"type":"object"}`
	norm, _ := json.Marshal(got)
	if string(norm) != want {
		t.Fatalf("schema:\n got %s\nwant %s", norm, want)
	}
	raw, err = Reflect(&sample{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"required":["name"]`) {
		t.Fatalf("without defaults the tag's required stays: %s", raw)
	}
}

func TestReflectRejectsNonObject(t *testing.T) {
	if _, err := Reflect(3, nil); err == nil {
		t.Fatal("want an error for a non-struct")
	}
}
