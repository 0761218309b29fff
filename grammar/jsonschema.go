package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// SchemaError lists what a JSON schema asks for that the compiler cannot
// enforce exactly, each with where in the schema (a JSON pointer). It wraps
// ErrGrammar.
type SchemaError struct{ Problems []string }

func (e *SchemaError) Error() string {
	return "json schema: " + strings.Join(e.Problems, "; ")
}

func (e *SchemaError) Unwrap() error { return ErrGrammar }

// JSONObject is the grammar of any JSON object (response_format
// json_object), with whitespace bounded as in FromJSONSchema.
func JSONObject() *Grammar {
	g, err := FromJSONSchema([]byte(`{"type": "object", "additionalProperties": true}`))
	if err != nil {
		panic(err) // a constant schema
	}
	return g
}

// FromJSONSchema compiles a JSON schema into the grammar of the JSON texts
// it validates, after at most a little leading whitespace. What the grammar
// allows always validates; it is narrower than the schema where JSON has
// several spellings: properties come in the schema's order, only declared
// ones unless additionalProperties says otherwise (as in OpenAI's strict
// mode and llama.cpp), numbers have at most 16 digits before and after the
// point and a two-digit exponent, whitespace runs are short, \u escapes
// exclude surrogates, and '<' is written \u003c, so that no string spells
// a tag (<think>, <tool_call>) that a chat parser would act on. Keywords it cannot enforce exactly are an error
// (SchemaError) naming each, never a looser grammar.
func FromJSONSchema(schema []byte) (*Grammar, error) {
	doc, err := decodeOrdered(schema)
	if err != nil {
		return nil, &SchemaError{Problems: []string{"not valid JSON: " + err.Error()}}
	}
	c := &schemaCompiler{e: newEmitter(), root: doc, refs: map[string]string{}}
	body := c.visit(doc, "")
	if len(c.problems) > 0 {
		return nil, &SchemaError{Problems: c.problems}
	}
	return ParseGBNF(c.e.text(c.prim("space") + " " + body))
}

// object is a JSON object with its keys in document order.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// decodeOrdered decodes JSON keeping object key order (properties are
// generated in it) and numbers exact.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return nil, fmt.Errorf("data after the schema at byte %d", dec.InputOffset())
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > 100 {
		return nil, fmt.Errorf("nested deeper than 100")
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		var a []any
		for dec.More() {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return t, nil
}

// encodeJSON writes v compactly, keys in order, without HTML escaping.
func encodeJSON(b *strings.Builder, v any) {
	switch x := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeJSON(b, k)
			b.WriteByte(':')
			encodeJSON(b, x.vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeJSON(b, e)
		}
		b.WriteByte(']')
	case string:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(x)
		b.WriteString(strings.TrimSuffix(buf.String(), "\n"))
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	}
}

// Keywords by what the compiler does with them.
var (
	annotationKeywords = []string{"title", "description", "default", "examples", "$schema", "$id", "$comment",
		"deprecated", "readOnly", "writeOnly", "$defs", "definitions", "contentMediaType", "contentEncoding"}
	supportedKeywords = []string{"type", "enum", "const", "anyOf", "allOf", "$ref", "properties", "required",
		"additionalProperties", "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format"}
	objectKeywords = []string{"properties", "required", "additionalProperties"}
	arrayKeywords  = []string{"items", "prefixItems", "minItems", "maxItems"}
	stringKeywords = []string{"minLength", "maxLength", "pattern", "format"}
)

// schemaCompiler compiles schemas into GBNF. Strings write '<' only as
// \u003c, so that no string can spell a tag (<think>, a tool call's
// closing one) that an output parser would act on.
type schemaCompiler struct {
	e        *emitter
	root     any
	refs     map[string]string // $ref → its rule
	problems []string
}

func (c *schemaCompiler) fail(path, format string, args ...any) {
	if path == "" {
		path = "/"
	}
	c.problems = append(c.problems, fmt.Sprintf("at %s: %s", path, fmt.Sprintf(format, args...)))
}

// primBodies are the primitive rules, and primDeps the rules each uses.
var (
	primBodies = map[string]string{
		"space":   `| " " | "\n"{1,2} [ \t]{0,20}`,
		"char":    `[^"\\\x7F\x00-\x1F<] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))`,
		"string":  `"\"" char* "\"" space`,
		"integer": `"-"? ("0" | [1-9] [0-9]{0,15}) space`,
		"number":  `"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? space`,
		"boolean": `("true" | "false") space`,
		"null":    `"null" space`,
		"value":   `object | array | string | number | boolean | null`,
		"object":  `"{" space (string ":" space value ("," space string ":" space value)*)? "}" space`,
		"array":   `"[" space (value ("," space value)*)? "]" space`,
	}
	primDeps = map[string][]string{"string": {"char", "space"}, "integer": {"space"}, "number": {"space"},
		"boolean": {"space"}, "null": {"space"}, "value": {"object", "array", "string", "number", "boolean", "null"},
		"object": {"space", "string", "value"}, "array": {"space", "value"}}
)

// prim defines a primitive rule and returns its name. Every value rule
// ends in space, so that what follows a value may be preceded by some.
func (c *schemaCompiler) prim(name string) string {
	if c.e.names[name] {
		return name
	}
	c.e.define(name, primBodies[name])
	for _, d := range primDeps[name] {
		c.prim(d)
	}
	return name
}

// visit returns a GBNF expression for the values schema s validates, each
// followed by space.
func (c *schemaCompiler) visit(s any, path string) string {
	switch x := s.(type) {
	case bool:
		if !x {
			c.fail(path, "the schema false admits no value")
			return c.prim("null")
		}
		return c.prim("value")
	case *object:
		return c.visitObject(x, path)
	}
	c.fail(path, "a schema must be an object or a boolean")
	return c.prim("null")
}

func (c *schemaCompiler) visitObject(s *object, path string) string {
	constraining := 0 // keywords that constrain, other than the one handled
	for _, k := range s.keys {
		switch {
		case slices.Contains(annotationKeywords, k):
		case slices.Contains(supportedKeywords, k):
			constraining++
		default:
			if known := unsupportedKeywords[k]; known != "" {
				c.fail(path, "keyword %q is not supported (%s)", k, known)
			} else {
				c.fail(path, "unknown keyword %q", k)
			}
		}
	}
	_, hasEnum := s.get("enum")
	_, hasConst := s.get("const")
	if _, ok := s.get("type"); ok && (hasEnum || hasConst) {
		constraining-- // the values are filtered by type
	}
	alone := func(k string) bool {
		if constraining > 1 {
			c.fail(path, "%q beside other constraining keywords is not supported", k)
			return false
		}
		return true
	}
	if ref, ok := s.get("$ref"); ok {
		if !alone("$ref") {
			return c.prim("value")
		}
		return c.ref(ref, path)
	}
	if v, ok := s.get("const"); ok {
		return c.enum([]any{v}, s, path, alone)
	}
	if v, ok := s.get("enum"); ok {
		vals, _ := v.([]any)
		if len(vals) == 0 {
			c.fail(path+"/enum", "enum must be a non-empty array")
			return c.prim("value")
		}
		return c.enum(vals, s, path, alone)
	}
	for _, k := range []string{"anyOf", "allOf"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		subs, _ := v.([]any)
		if len(subs) == 0 {
			c.fail(path+"/"+k, "%s must be a non-empty array", k)
			return c.prim("value")
		}
		if !alone(k) {
			return c.prim("value")
		}
		if k == "allOf" {
			if len(subs) > 1 {
				c.fail(path+"/allOf", "allOf with more than one schema is not supported")
				return c.prim("value")
			}
			return c.visit(subs[0], path+"/allOf/0")
		}
		var alts []string
		for i, sub := range subs {
			alts = append(alts, c.visit(sub, fmt.Sprintf("%s/anyOf/%d", path, i)))
		}
		return c.e.rule(ruleBase(path, "any-of"), strings.Join(alts, " | "))
	}
	var types []string
	switch t := s.vals["type"].(type) {
	case nil:
		// No type: what the keywords present imply, or any value.
		has := func(ks []string) bool {
			return slices.ContainsFunc(ks, func(k string) bool { _, ok := s.get(k); return ok })
		}
		switch {
		case has(objectKeywords):
			types = []string{"object"}
		case has(arrayKeywords):
			types = []string{"array"}
		case has(stringKeywords):
			types = []string{"string"}
		default:
			return c.prim("value")
		}
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			name, _ := e.(string)
			types = append(types, name)
		}
	default:
		c.fail(path+"/type", "type must be a string or an array of strings")
		return c.prim("value")
	}
	var alts []string
	for _, t := range types {
		alts = append(alts, c.typed(t, s, path))
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

// enum is the grammar of the values vals (enum or const), of those that
// the schema's type admits, if it has one: type is the one keyword that may
// stand beside them.
func (c *schemaCompiler) enum(vals []any, s *object, path string, alone func(string) bool) string {
	t, typed := s.get("type")
	kw := "enum"
	if _, ok := s.get("const"); ok {
		kw = "const"
	}
	if !alone(kw) {
		return c.prim("value")
	}
	var alts []string
	for _, v := range vals {
		if typed && !hasType(v, t) {
			continue
		}
		alts = append(alts, c.literal(v))
	}
	if len(alts) == 0 {
		c.fail(path, "no value of %s has the type %v", kw, t)
		return c.prim("value")
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

// hasType reports whether the JSON value v is of type t (a name or a list).
func hasType(v, t any) bool {
	if list, ok := t.([]any); ok {
		return slices.ContainsFunc(list, func(e any) bool { return hasType(v, e) })
	}
	switch v := v.(type) {
	case string:
		return t == "string"
	case json.Number:
		if t == "number" {
			return true
		}
		f, err := strconv.ParseFloat(v.String(), 64)
		return t == "integer" && err == nil && f == float64(int64(f))
	case bool:
		return t == "boolean"
	case nil:
		return t == "null"
	case *object:
		return t == "object"
	case []any:
		return t == "array"
	}
	return false
}

// unsupportedKeywords are keywords that constrain values in ways the
// compiler does not enforce, with why.
var unsupportedKeywords = map[string]string{
	"oneOf":                 "exactly one branch matching cannot be expressed; use anyOf",
	"not":                   "negation cannot be expressed",
	"if":                    "conditionals cannot be expressed",
	"then":                  "conditionals cannot be expressed",
	"else":                  "conditionals cannot be expressed",
	"minimum":               "numeric ranges are not compiled",
	"maximum":               "numeric ranges are not compiled",
	"exclusiveMinimum":      "numeric ranges are not compiled",
	"exclusiveMaximum":      "numeric ranges are not compiled",
	"multipleOf":            "numeric multiples are not compiled",
	"patternProperties":     "property name patterns are not compiled",
	"propertyNames":         "property name schemas are not compiled",
	"minProperties":         "property counts are not compiled",
	"maxProperties":         "property counts are not compiled",
	"dependentRequired":     "dependencies cannot be expressed",
	"dependentSchemas":      "dependencies cannot be expressed",
	"dependencies":          "dependencies cannot be expressed",
	"unevaluatedProperties": "cannot be expressed",
	"unevaluatedItems":      "cannot be expressed",
	"uniqueItems":           "uniqueness cannot be expressed",
	"contains":              "cannot be expressed",
	"minContains":           "cannot be expressed",
	"maxContains":           "cannot be expressed",
	"additionalItems":       "draft-4 tuples are not supported; use prefixItems",
	"$dynamicRef":           "dynamic references are not supported",
	"$recursiveRef":         "dynamic references are not supported",
}

func ruleBase(path, kind string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	last := parts[len(parts)-1]
	if last == "" || last == "properties" {
		return kind
	}
	return last + "-" + kind
}

// literal is the grammar of exactly the JSON value v.
func (c *schemaCompiler) literal(v any) string {
	return gbnfLiteral(c.encode(v)) + " " + c.prim("space")
}

// encode writes v as JSON, '<' (only ever inside strings) as \u003c: the
// same value.
func (c *schemaCompiler) encode(v any) string {
	var b strings.Builder
	encodeJSON(&b, v)
	return strings.ReplaceAll(b.String(), "<", `\u003c`)
}

// ref compiles a local reference (#, #/$defs/..., #/definitions/...) as a
// rule of its own, so that recursive schemas work.
func (c *schemaCompiler) ref(v any, path string) string {
	ref, _ := v.(string)
	if name, ok := c.refs[ref]; ok {
		return name
	}
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		c.fail(path+"/$ref", "only references inside the schema (#/...) are supported, not %q", ref)
		return c.prim("value")
	}
	target := c.root
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch t := target.(type) {
		case *object:
			target = t.vals[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				target = nil
			} else {
				target = t[i]
			}
		default:
			target = nil
		}
		if target == nil {
			c.fail(path+"/$ref", "reference %q leads nowhere", ref)
			return c.prim("value")
		}
	}
	// Name the rule before compiling it, for references to itself.
	name := c.e.rule("ref-"+ref[strings.LastIndex(ref, "/")+1:], "")
	c.refs[ref] = name
	body := c.visit(target, strings.TrimPrefix(ref, "#"))
	for i, l := range c.e.lines {
		if l == name+" ::= " {
			c.e.lines[i] = name + " ::= " + body
		}
	}
	return name
}

// count reads a non-negative integer keyword, -1 if absent.
func (c *schemaCompiler) count(s *object, key, path string) int {
	v, ok := s.get(key)
	if !ok {
		return -1
	}
	n, _ := v.(json.Number)
	i, err := strconv.Atoi(n.String())
	if err != nil || i < 0 {
		c.fail(path+"/"+key, "%s must be a non-negative integer", key)
		return -1
	}
	if i > maxRepeat {
		c.fail(path+"/"+key, "%s above %d is not supported", key, maxRepeat)
		return -1
	}
	return i
}

func (c *schemaCompiler) typed(t string, s *object, path string) string {
	switch t {
	case "string":
		return c.stringRule(s, path)
	case "integer", "number", "boolean", "null":
		return c.prim(t)
	case "object":
		return c.objectRule(s, path)
	case "array":
		return c.arrayRule(s, path)
	}
	c.fail(path+"/type", "unknown type %q", t)
	return c.prim("value")
}

// stringFormats are the formats compiled exactly, in JSON string content.
var stringFormats = map[string]string{
	"uuid": `hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12}`,
	// Days by month; 29 February in leap years only.
	"date":      `year "-" (("01" | "03" | "05" | "07" | "08" | "10" | "12") "-" day31 | ("04" | "06" | "09" | "11") "-" day30 | "02-" day28) | leap-year "-02-29"`,
	"time":      `time`,
	"date-time": `year "-" (("01" | "03" | "05" | "07" | "08" | "10" | "12") "-" day31 | ("04" | "06" | "09" | "11") "-" day30 | "02-" day28) "T" time | leap-year "-02-29T" time`,
	"ipv4":      `octet "." octet "." octet "." octet`,
}

var formatParts = [][2]string{
	{"hex", `[0-9a-fA-F]`},
	{"year", `[0-9]{4}`},
	{"leap-year", `[0-9]{2} ("0" [48] | [2468] [048] | [13579] [26]) | ([02468] [048] | [13579] [26]) "00"`},
	{"day28", `"0" [1-9] | "1" [0-9] | "2" [0-8]`},
	{"day30", `"0" [1-9] | [12] [0-9] | "30"`},
	{"day31", `"0" [1-9] | [12] [0-9] | "3" [01]`},
	{"hour", `[01] [0-9] | "2" [0-3]`},
	{"minute", `[0-5] [0-9]`},
	{"time", `hour ":" minute ":" minute ("." [0-9]{1,9})? ("Z" | [+-] hour ":" minute)`},
	{"octet", `"25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]`},
}

func (c *schemaCompiler) stringRule(s *object, path string) string {
	lo, hi := c.count(s, "minLength", path), c.count(s, "maxLength", path)
	pattern, hasPattern := s.get("pattern")
	format, hasFormat := s.get("format")
	n := 0
	for _, b := range []bool{lo >= 0 || hi >= 0, hasPattern, hasFormat} {
		if b {
			n++
		}
	}
	if n > 1 {
		c.fail(path, "combining length bounds, pattern and format in one string is not supported")
		return c.prim("string")
	}
	switch {
	case hasFormat:
		f, _ := format.(string)
		body, ok := stringFormats[f]
		if !ok {
			c.fail(path+"/format", "format %q is not supported (supported: date, date-time, time, uuid, ipv4)", f)
			return c.prim("string")
		}
		for _, p := range formatParts {
			c.e.define(p[0], p[1])
		}
		return c.e.shared("format-"+f, `"\"" (`+body+`) "\"" `+c.prim("space"))
	case hasPattern:
		p, _ := pattern.(string)
		body, err := regexBody(c.e, p, jsonText, false)
		if err != nil {
			c.fail(path+"/pattern", "%v", strings.TrimPrefix(err.Error(), ErrGrammar.Error()+": "))
			return c.prim("string")
		}
		return c.e.rule(ruleBase(path, "pattern"), `"\"" `+body+` "\"" `+c.prim("space"))
	case lo >= 0 || hi >= 0:
		lo = max(lo, 0)
		if hi >= 0 && hi < lo {
			c.fail(path, "maxLength %d is below minLength %d", hi, lo)
			return c.prim("string")
		}
		c.prim("string")
		rep := fmt.Sprintf("{%d,}", lo)
		if hi >= 0 {
			rep = fmt.Sprintf("{%d,%d}", lo, hi)
		}
		return c.e.shared("string"+strings.NewReplacer("{", "-", "}", "", ",", "-").Replace(rep), `"\"" char`+rep+` "\"" space`)
	}
	return c.prim("string")
}

func (c *schemaCompiler) objectRule(s *object, path string) string {
	props, _ := s.vals["properties"].(*object)
	if p, ok := s.get("properties"); ok && props == nil {
		c.fail(path+"/properties", "properties must be an object, not %T", p)
	}
	if props == nil {
		props = &object{vals: map[string]any{}}
	}
	required := map[string]bool{}
	if r, ok := s.get("required"); ok {
		list, _ := r.([]any)
		for _, e := range list {
			name, ok := e.(string)
			if !ok {
				c.fail(path+"/required", "required must list strings")
				continue
			}
			required[name] = true
		}
	}
	// additionalProperties: absent or false, none; true or a schema, any
	// other key with values of that schema.
	var additional any = false
	if a, ok := s.get("additionalProperties"); ok {
		additional = a
	}
	names := slices.Clone(props.keys)
	schemas := map[string]any{}
	for _, k := range props.keys {
		schemas[k] = props.vals[k]
	}
	var missing []string
	for k := range required {
		if _, ok := schemas[k]; !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		if additional == false {
			c.fail(path+"/required", "%q is required but not among the properties, and additionalProperties is false", k)
			continue
		}
		names, schemas[k] = append(names, k), additional
	}
	// A_i: properties i.. with none written yet; B_i: with some written, so
	// each starts with a comma. Optional properties may be skipped.
	space := c.prim("space")
	kv := make([]string, len(names))
	for i, k := range names {
		kv[i] = gbnfLiteral(c.encode(k)) + " " + space + ` ":" ` + space + " " + c.visit(schemas[k], path+"/properties/"+escapePointer(k))
	}
	base := ruleBase(path, "obj")
	tailA, tailB := `""`, `""`
	if additional != false {
		value := c.visit(additional, path+"/additionalProperties")
		extra := c.e.rule(base+"-extra", c.keyNotIn(names)+" "+space+` ":" `+space+" "+value)
		tailA = "(" + extra + ` ("," ` + space + " " + extra + ")*)?"
		tailB = `("," ` + space + " " + extra + ")*"
	}
	a, b := tailA, tailB
	for i := len(names) - 1; i >= 0; i-- {
		na := kv[i] + " " + b
		nb := `"," ` + space + " " + kv[i] + " " + b
		if !required[names[i]] {
			na += " | " + a
			nb += " | " + b
		}
		a = c.e.rule(fmt.Sprintf("%s-a%d", base, i), na)
		b = c.e.rule(fmt.Sprintf("%s-b%d", base, i), nb)
	}
	return c.e.rule(base, `"{" `+space+" "+a+` "}" `+space)
}

// keyNotIn is the grammar of a JSON string key other than names, written
// without escapes: the trie of the names, left at any character where no
// name continues, or ended where none ends.
func (c *schemaCompiler) keyNotIn(names []string) string {
	c.prim("string")
	type node struct {
		kids  map[rune]*node
		order []rune
		end   bool
	}
	root := &node{kids: map[rune]*node{}}
	for _, n := range names {
		at := root
		for _, r := range n {
			if _, esc := jsonEscape(r); esc {
				at = nil // a name needing escapes cannot be spelled without them
				break
			}
			k, ok := at.kids[r]
			if !ok {
				k = &node{kids: map[rune]*node{}}
				at.kids[r] = k
				at.order = append(at.order, r)
			}
			at = k
		}
		if at != nil {
			at.end = true
		}
	}
	plain := c.e.define("plain-char", `[^"\\\x7F\x00-\x1F<]`)
	var build func(n *node) string
	build = func(n *node) string {
		var alts []string
		if !n.end {
			alts = append(alts, `"\""`)
		}
		excluded := []span{{'"', '"'}, {'\\', '\\'}, {'<', '<'}, {0x7f, 0x7f}, {0, 0x1f}}
		for _, r := range n.order {
			alts = append(alts, gbnfLiteral(string(r))+" "+build(n.kids[r]))
			excluded = append(excluded, span{r, r})
		}
		alts = append(alts, gbnfClass(excluded, true)+" "+plain+`* "\""`)
		return c.e.rule("key", strings.Join(alts, " | "))
	}
	return `"\"" ` + build(root)
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func (c *schemaCompiler) arrayRule(s *object, path string) string {
	lo, hi := c.count(s, "minItems", path), c.count(s, "maxItems", path)
	lo = max(lo, 0)
	if hi >= 0 && hi < lo {
		c.fail(path, "maxItems %d is below minItems %d", hi, lo)
		hi = lo
	}
	var prefix []string
	if p, ok := s.get("prefixItems"); ok {
		list, _ := p.([]any)
		for i, e := range list {
			prefix = append(prefix, c.visit(e, fmt.Sprintf("%s/prefixItems/%d", path, i)))
		}
	}
	item := c.prim("value") // items absent: anything
	if it, ok := s.get("items"); ok {
		if _, isList := it.([]any); isList {
			c.fail(path+"/items", "items as an array (draft-4 tuples) is not supported; use prefixItems")
		} else if it == false {
			item = ""
			if hi < 0 || hi > len(prefix) {
				hi = len(prefix)
			}
		} else {
			item = c.visit(it, path+"/items")
		}
	}
	if lo > hi && hi >= 0 {
		c.fail(path, "minItems %d cannot be met by %d items", lo, hi)
		lo = hi
	}
	space := c.prim("space")
	elem := func(i int) string {
		if i < len(prefix) {
			return prefix[i]
		}
		return item
	}
	// rest(i): elements from position i on, after at least one.
	var rest func(i int) string
	rest = func(i int) string {
		if hi >= 0 && i >= hi {
			return ""
		}
		if i >= len(prefix) { // the uniform tail: a counted repetition
			need := max(lo-i, 0)
			rep := fmt.Sprintf("{%d,}", need)
			if hi >= 0 {
				rep = fmt.Sprintf("{%d,%d}", need, hi-i)
			}
			return `("," ` + space + " " + item + ")" + rep
		}
		part := `"," ` + space + " " + elem(i) + " " + rest(i+1)
		if i >= lo {
			return "(" + part + ")?"
		}
		return "(" + part + ")"
	}
	var inner string
	switch {
	case hi == 0:
		inner = ""
	default:
		inner = "(" + elem(0) + " " + rest(1) + ")"
		if lo == 0 {
			inner += "?"
		}
	}
	return c.e.rule(ruleBase(path, "arr"), `"[" `+space+" "+inner+` "]" `+space)
}
