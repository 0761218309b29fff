package grammar_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/govllm/govllm/grammar"
	"github.com/govllm/govllm/internal/jsonref"
)

func validator(t *testing.T, schema string) *jsonschema.Schema { return jsonref.Compile(t, schema) }

func validates(_ *testing.T, s *jsonschema.Schema, text string) error {
	return jsonref.Validate(s, text)
}

// schemaCases are schemas with texts the grammar must accept (written in
// the schema's property order) and texts it must reject.
var schemaCases = []struct {
	schema    string
	good, bad []string
}{
	{`{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}`,
		[]string{`{"name": "Ann", "age": 41}`, `{"name":"","age":-3}`, "\n\n{ \"name\" : \"x\\u00e9\\n\" , \"age\" : 0 }"},
		[]string{`{"age": 41, "name": "Ann"}`, `{"name": "Ann"}`, `{"name": "Ann", "age": 4.5}`, `{"name": "Ann", "age": 41, "x": 1}`, `{"name": "Ann", "age": 041}`}},
	{`{"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "number"}}}`,
		[]string{`{}`, `{"b": null}`, `{"a": true, "c": -1.5e-7}`, `{"a": false, "b": null, "c": 0}`},
		[]string{`{"c": 1, "a": true}`, `{,}`, `{"a": true,}`, `{"b": 1}`}},
	{`{"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"], "additionalProperties": {"type": "string"}}`,
		[]string{`{"id": 1}`, `{"id": 1, "x": "y", "ida": "z"}`, `{"id": 2, "i": ""}`},
		[]string{`{"id": 1, "x": 2}`, `{"id": 1, "id": "dup"}`, `{"x": "y"}`}},
	{`{"enum": ["red", "green", 3, null, {"k": [1]}]}`,
		[]string{`"red"`, `3`, `null`, `{"k":[1]}`}, []string{`"blue"`, `"Red"`, `4`}},
	{`{"type": "string", "enum": ["a", 1, "b"]}`, []string{`"a"`, `"b"`}, []string{`1`}},
	{`{"const": "fixed"}`, []string{`"fixed"`}, []string{`"fixe"`, `"fixedd"`}},
	{`{"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3}`,
		[]string{`[1, 2]`, `[1,2,3]`}, []string{`[]`, `[1]`, `[1,2,3,4]`, `[1, "2"]`}},
	{`{"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": false}`,
		[]string{`[]`, `["a"]`, `["a", true]`}, []string{`["a", true, 1]`, `[true]`}},
	{`{"type": "array", "prefixItems": [{"const": 1}], "items": {"type": "string"}, "minItems": 2}`,
		[]string{`[1, "a"]`, `[1, "a", "b"]`}, []string{`[1]`, `["a", "b"]`}},
	{`{"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}]}`,
		[]string{`7`, `{"x": ""}`}, []string{`"7"`, `{}`}},
	{`{"type": ["string", "null"], "maxLength": 3}`, []string{`null`, `"abc"`, `"é漢😀"`}, []string{`"abcd"`, `1`}},
	{`{"type": "string", "minLength": 2, "maxLength": 4}`, []string{`"ab"`, `"\u00e9\n"`}, []string{`"a"`, `"abcde"`}},
	{`{"type": "string", "format": "date"}`, []string{`"2024-02-29"`, `"1999-12-31"`, `"2000-02-29"`},
		[]string{`"2023-02-29"`, `"1900-02-29"`, `"2024-04-31"`, `"2024-13-01"`, `"24-01-01"`}},
	{`{"type": "string", "format": "date-time"}`, []string{`"2024-01-02T03:04:05Z"`, `"2024-01-02T23:59:59.123+05:30"`},
		[]string{`"2024-01-02 03:04:05Z"`, `"2024-01-02T24:00:00Z"`}},
	{`{"type": "string", "format": "uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`}},
	{`{"type": "string", "format": "ipv4"}`, []string{`"192.168.0.1"`, `"0.0.0.0"`}, []string{`"256.1.1.1"`, `"01.1.1.1"`}},
	{`{"type": "string", "pattern": "^[a-z]{2,3}-\\d+$"}`, []string{`"ab-1"`, `"xyz-0042"`}, []string{`"ab-"`, `"abcd-1"`, `"x ab-1"`}},
	{`{"type": "string", "pattern": "^q\"\\\\"}`, []string{`"q\"\\"`, `"q\"\\b"`}, []string{`"q"`, `"aq\"\\"`}},
	{`{"type": "string", "pattern": "\\d"}`, []string{`"1"`, `"ab3c"`}, []string{`"abc"`}},
	{`{"type": "string", "pattern": "(?i)^yes$"}`, []string{`"yes"`, `"YeS"`}, []string{`"no"`}},
	{`{"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}}, "$ref": "#/$defs/node"}`,
		[]string{`{"v": 1, "next": {"v": 2, "next": null}}`}, []string{`{"v": 1}`, `{"v": 1, "next": {"v": 2}}`}},
	{`{"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 2}, "meta": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}, "required": ["meta"]}`,
		[]string{`{"meta": {"ok": true}}`, `{"tags": ["a", "b"], "meta": {"ok": false}}`}, []string{`{"tags": ["a", "b", "c"], "meta": {"ok": true}}`, `{"tags": []}`}},
	{`{"type": "object", "additionalProperties": true}`, []string{`{}`, `{"a": [1, {"b": null}], "c": "d"}`}, []string{`[]`, `{"a"}`}},
	{`{"allOf": [{"type": "integer"}], "description": "one schema"}`, []string{`12`}, []string{`1.5`}},
	{`true`, []string{`1`, `"s"`, `{"a": []}`}, []string{`{`}},
	{`{}`, []string{`null`, `[true]`}, []string{`nul`}},
}

// TestSchemaGrammarsMatch checks each schema's grammar against texts
// chosen to pass and to fail, and checks the choice with the reference
// validator.
func TestSchemaGrammarsMatch(t *testing.T) {
	for _, c := range schemaCases {
		g, err := grammar.FromJSONSchema([]byte(c.schema))
		if err != nil {
			t.Errorf("%s: %v", c.schema, err)
			continue
		}
		ref := validator(t, c.schema)
		for _, text := range c.good {
			if err := validates(t, ref, text); err != nil {
				t.Errorf("%s: test text %s fails the reference: %v", c.schema, text, err)
			}
			if !g.Match(text) {
				t.Errorf("%s: the grammar rejects %s", c.schema, text)
			}
		}
		for _, text := range c.bad {
			if g.Match(text) {
				t.Errorf("%s: the grammar accepts %s", c.schema, text)
			}
		}
	}
}

// TestSchemaGrammarsGenerateValid samples texts from each schema's grammar
// through masks over a small vocabulary (single bytes, multi-byte code
// points and JSON fragments), leaning towards closing tokens so that walks
// end, and validates every text with the reference validator.
func TestSchemaGrammarsGenerateValid(t *testing.T) {
	var toks [][]byte
	for c := 0; c < 128; c++ {
		toks = append(toks, []byte{byte(c)})
	}
	for _, s := range []string{"é", "漢", "😀", "\xe6", "\xbc", "\xa2", "true", "false", "null", `":`, `": `, `", "`,
		`{"`, `"}`, "},", "]}", `\u00`, `\n`, "2024-", "-02-29", "T12:", "00Z", "123e4567", "-e89b-", "192.", "\n  "} {
		toks = append(toks, []byte(s))
	}
	v := grammar.NewVocab(len(toks), func(id int32) []byte { return toks[id] })
	closing := func(b []byte) bool { return strings.ContainsAny(string(b), "\"]},") }
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range schemaCases {
		g, err := grammar.FromJSONSchema([]byte(c.schema))
		if err != nil {
			t.Errorf("%s: %v", c.schema, err)
			continue
		}
		ref := validator(t, c.schema)
		mk := grammar.NewMasker(g, v)
		done := 0
		for walk := 0; walk < 40; walk++ {
			p, text := mk.Start(), []byte(nil)
			for step := 0; step < 300; step++ {
				m := mk.Mask(p)
				var allowed, close []int32
				for id := range int32(len(toks)) {
					if m.Has(id) {
						allowed = append(allowed, id)
						if closing(toks[id]) {
							close = append(close, id)
						}
					}
				}
				if p.Accepting() && (len(allowed) == 0 || rng.IntN(4) == 0) {
					break
				}
				if len(allowed) == 0 {
					t.Fatalf("%s: nothing allowed after %q, which is not accepted", c.schema, text)
				}
				pick := allowed
				if len(close) > 0 && rng.IntN(2) == 0 {
					pick = close
				}
				id := pick[rng.IntN(len(pick))]
				text = append(text, toks[id]...)
				p = mk.Advance(p, toks[id])
			}
			if !p.Accepting() {
				continue
			}
			done++
			if err := validates(t, ref, string(text)); err != nil {
				t.Fatalf("%s: the grammar generated %q, which the reference rejects: %v", c.schema, text, err)
			}
		}
		if done < 20 {
			t.Errorf("%s: only %d of 40 walks ended", c.schema, done)
		}
	}
}

func TestSchemaErrorsNameTheProblem(t *testing.T) {
	for schema, want := range map[string][]string{
		`{"oneOf": [{"type": "string"}, {"type": "integer"}]}`:                       {`at /: keyword "oneOf"`},
		`{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}`: {`at /properties/n: keyword "minimum"`},
		`{"type": "string", "format": "email"}`:                                      {`format "email" is not supported`},
		`{"type": "string", "frmat": "date"}`:                                        {`unknown keyword "frmat"`},
		`{"$ref": "https://example.com/s.json"}`:                                     {"only references inside the schema"},
		`{"type": "array", "uniqueItems": true, "maxItems": 2000}`:                   {`"uniqueItems"`, "maxItems above 1000"},
		`{"type": "string", "pattern": "\\bword"}`:                                   {"word boundaries"},
		`{"type": "object", "required": ["x"], "additionalProperties": false}`:       {`"x" is required but not among the properties`},
		`{"type": "strin"}`: {`unknown type "strin"`},
		`{"type": "object"`: {"not valid JSON"},
	} {
		_, err := grammar.FromJSONSchema([]byte(schema))
		var se *grammar.SchemaError
		if !errors.As(err, &se) || !errors.Is(err, grammar.ErrGrammar) {
			t.Errorf("%s: want a SchemaError, got %v", schema, err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", schema, err, w)
			}
		}
	}
}

func TestRegexGrammars(t *testing.T) {
	for _, c := range []struct {
		re        string
		good, bad []string
	}{
		{`\d{3}-[A-Z]+`, []string{"123-AB"}, []string{"12-AB", "123-ab", "x123-AB"}},
		{`(cat|dog)s?`, []string{"cat", "dogs"}, []string{"cats!", "bird"}},
		{`^a.c$`, []string{"abc", "a漢c"}, []string{"a\nc", "ac"}},
		{`[^a-c]+`, []string{"xyz", "é"}, []string{"xay", ""}},
		{`(?s)a.c`, []string{"a\nc"}, nil},
		{`x*`, []string{"", "xxx"}, []string{"y"}},
	} {
		g, err := grammar.FromRegex(c.re)
		if err != nil {
			t.Errorf("%s: %v", c.re, err)
			continue
		}
		for _, s := range c.good {
			if !g.Match(s) {
				t.Errorf("%s: rejects %q", c.re, s)
			}
		}
		for _, s := range c.bad {
			if g.Match(s) {
				t.Errorf("%s: accepts %q", c.re, s)
			}
		}
	}
	for _, bad := range []string{`(`, `a\b`, `a^b`} {
		if _, err := grammar.FromRegex(bad); !errors.Is(err, grammar.ErrGrammar) {
			t.Errorf("%s: want an error, got %v", bad, err)
		}
	}
}

// FuzzFromJSONSchema: any input compiles or fails with ErrGrammar, and a
// compiled grammar's texts pass the reference validator where the fuzzer
// also gives one that matches.
func FuzzFromJSONSchema(f *testing.F) {
	for _, c := range schemaCases {
		for _, g := range c.good {
			f.Add(c.schema, g)
		}
	}
	f.Fuzz(func(t *testing.T, schema, text string) {
		if len(schema) > 2048 || len(text) > 512 {
			return
		}
		g, err := grammar.FromJSONSchema([]byte(schema))
		if err != nil {
			if !errors.Is(err, grammar.ErrGrammar) {
				t.Fatalf("error not wrapping ErrGrammar: %v", err)
			}
			return
		}
		if !g.Match(text) {
			return
		}
		if !json.Valid([]byte(schema)) {
			t.Fatalf("compiled a schema that is not JSON: %q", schema)
		}
		ref, err := jsonref.TryCompile(schema)
		if err != nil {
			return // the reference refuses what we compiled (e.g. a bad regex for it)
		}
		if !json.Valid([]byte(text)) {
			t.Fatalf("schema %s: the grammar accepts %q, which is not JSON", schema, text)
		}
		if err := jsonref.Validate(ref, text); err != nil {
			t.Fatalf("schema %s: the grammar accepts %q, which the reference rejects: %v", schema, text, err)
		}
	})
}

func FuzzFromRegex(f *testing.F) {
	for _, s := range []string{`\d{3}-[A-Z]+`, `(cat|dog)s?`, `^a.c$`, `[^a-c]+`, `(?i)x{2,5}`} {
		f.Add(s, "abc")
	}
	f.Fuzz(func(t *testing.T, re, text string) {
		if len(re) > 256 {
			return
		}
		g, err := grammar.FromRegex(re)
		if err != nil {
			if !errors.Is(err, grammar.ErrGrammar) {
				t.Fatalf("error not wrapping ErrGrammar: %v", err)
			}
			return
		}
		g.Match(text)
	})
}
