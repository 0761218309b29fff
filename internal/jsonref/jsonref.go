// Package jsonref is the reference JSON Schema validator of the tests:
// santhosh-tekuri/jsonschema, draft 2020-12, formats asserted.
package jsonref

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile compiles schema or fails the test.
func Compile(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	s, err := TryCompile(schema)
	if err != nil {
		t.Fatalf("reference validator: %v", err)
	}
	return s
}

// TryCompile compiles schema.
func TryCompile(schema string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("schema.json")
}

// Validate parses text as JSON and validates it against s.
func Validate(s *jsonschema.Schema, text string) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}
