package ratelimit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ratekit/ratelimit/internal/quote"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/strategy"
)

// checkDocument reads a policy document token by token, before
// encoding/json decodes it, for what encoding/json lets through or reports
// without the field's path: an unknown field or one in the wrong case, a
// repeated field or policy, a null, a value of the wrong type, a missing
// required field, too many members. Its errors are *FieldErrors of the
// policy and the field's JSON path, or, for the document as a whole, errors
// wrapping strategy.ErrInvalidOption. What it accepts, json.Unmarshal
// decodes into map[string]policyDoc without an error.
func checkDocument(data []byte) error {
	c := checker{dec: json.NewDecoder(bytes.NewReader(data))}
	c.dec.UseNumber()
	if err := c.members(docSchema(), "", "", "", 0); err != nil {
		return err
	}
	if _, err := c.dec.Token(); err != io.EOF {
		return docError("invalid JSON: data after the object")
	}
	return nil
}

// docError is an error of the document as a whole.
func docError(format string, args ...any) error {
	return fmt.Errorf("%w: policies: %s", strategy.ErrInvalidOption, fmt.Sprintf(format, args...))
}

// node is what a place in a document holds, read from policyDoc's types
// and struct tags.
type node struct {
	kind   reflect.Kind     // Struct, Map, Slice; a scalar's: String, Int64, Float64, Bool; Int64 with dur for a duration
	dur    bool             // a duration string
	fields map[string]field // Struct: by JSON name
	list   string           // Struct: the JSON names, quoted, for an error
	elem   *node            // Map, Slice
	max    int              // Map, Slice: the most members
}

type field struct {
	goName string
	n      *node
}

// docSchema is the schema of a document: an object of policies.
var docSchema = sync.OnceValue(func() *node {
	seen := map[reflect.Type]*node{}
	policy := nodeOf(reflect.TypeFor[policyDoc](), seen)
	policy.fields["tiers"].n.max = maxTiers
	policy.fields["rules"].n.max = multilimit.MaxRules
	return &node{kind: reflect.Map, elem: policy, max: maxPolicies}
})

func nodeOf(t reflect.Type, seen map[reflect.Type]*node) *node {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n, ok := seen[t]; ok {
		return n
	}
	n := &node{kind: t.Kind()}
	seen[t] = n
	switch t.Kind() {
	case reflect.Struct:
		n.fields = map[string]field{}
		var names []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			n.fields[name] = field{goName: f.Name, n: nodeOf(f.Type, seen)}
			names = append(names, fmt.Sprintf("%q", name))
		}
		n.list = strings.Join(names, ", ")
	case reflect.Map, reflect.Slice:
		n.elem = nodeOf(t.Elem(), seen)
	case reflect.Int, reflect.Int64:
		n.kind, n.dur = reflect.Int64, t == reflect.TypeFor[duration]()
	}
	return n
}

// checker walks a document.
type checker struct{ dec *json.Decoder }

// fail returns the *FieldError of the field at path (goPath in Go) of
// policy: msg after ErrInvalidOption's message.
func fail(policy, path, goPath, msg string) error {
	fe := policyFault(policy, strategy.ErrInvalidOption, msg)
	fe.Field, fe.JSON, fe.json = goPath, path, true
	return fe
}

// value checks the value at path (goPath in Go) of policy, and returns a
// string's value (to know a policy's algorithm). depth counts candidates.
func (c *checker) value(n *node, policy, path, goPath string, depth int) (string, error) {
	if n.kind == reflect.Struct || n.kind == reflect.Map || n.kind == reflect.Slice {
		return "", c.members(n, policy, path, goPath, depth)
	}
	var raw json.RawMessage
	if err := c.dec.Decode(&raw); err != nil {
		return "", docError("invalid JSON after %s: %v", quote.Value(path), err)
	}
	if string(raw) == "null" { // json.Unmarshal would leave the zero value
		return "", fail(policy, path, goPath, "want a value, got null")
	}
	var s string
	var err error
	want := "a string"
	switch {
	case n.dur:
		want = `a duration string like "1m"`
		if err = json.Unmarshal(raw, &s); err == nil {
			if _, err := time.ParseDuration(s); err != nil {
				return "", fail(policy, path, goPath, `want a duration string like "1m" or "1h30m", got `+quote.Value(s))
			}
		}
	case n.kind == reflect.Int64:
		want = "an integer"
		err = json.Unmarshal(raw, new(int64))
	case n.kind == reflect.Float64:
		want = "a number"
		err = json.Unmarshal(raw, new(float64))
	case n.kind == reflect.Bool:
		want = "true or false"
		err = json.Unmarshal(raw, new(bool))
	default:
		err = json.Unmarshal(raw, &s)
	}
	if err != nil {
		return "", fail(policy, path, goPath, "want "+want+", got "+prefixOf(raw))
	}
	return s, nil
}

// members checks an object (n a Struct or a Map) or an array (a Slice).
// A Map at path "" is the document, whose members are policies.
func (c *checker) members(n *node, policy, path, goPath string, depth int) error {
	tok, err := c.dec.Token()
	if err != nil {
		return docError("invalid JSON: %v", err)
	}
	open, want := json.Delim('{'), "a JSON object"
	if n.kind == reflect.Slice {
		open, want = '[', "a JSON array"
	}
	if d, ok := tok.(json.Delim); !ok || d != open {
		if path == "" && policy == "" {
			return docError("want %s, got %s", want, tokenText(tok))
		}
		return fail(policy, path, goPath, fmt.Sprintf("want %s, got %s", want, tokenText(tok)))
	}
	doc := n.kind == reflect.Map && path == "" && policy == "" // the document: its members are policies
	var seen []string
	var policies map[string]bool // doc: the policies seen, a thousand of them at most
	if doc {
		policies = map[string]bool{}
	}
	var algorithm string
	for i := 0; c.dec.More(); i++ {
		if (n.kind == reflect.Map || n.kind == reflect.Slice) && i == n.max {
			if doc {
				return docError("want at most %d policies", n.max)
			}
			return fail(policy, path, goPath, fmt.Sprintf("want at most %d %s", n.max, path[strings.LastIndexByte(path, '.')+1:]))
		}
		var sub, goSub, key string
		elem := n.elem
		if n.kind == reflect.Slice {
			sub, goSub = fmt.Sprintf("%s[%d]", path, i), fmt.Sprintf("%s[%d]", goPath, i)
		} else {
			tok, err := c.dec.Token()
			if err != nil {
				return docError("invalid JSON: %v", err)
			}
			key = tok.(string) // the decoder reads only strings as member names
			sub, goSub = join(path, key), join(goPath, key)
			switch {
			case doc && policies[key]:
				return policyFault(key, strategy.ErrInvalidOption, "the policy appears twice")
			case doc:
				policies[key] = true
			case slices.Contains(seen, key):
				return fail(policy, sub, goSub, "the field appears twice")
			default:
				seen = append(seen, key)
			}
			if n.kind == reflect.Struct {
				f, ok := n.fields[key]
				switch {
				case !ok:
					return fail(policy, sub, goSub, fmt.Sprintf("unknown field %s; the fields are %s", quote.Value(key), n.list))
				case key == "candidate" && depth > 0:
					return fail(policy, sub, goSub, "a candidate cannot have a candidate")
				}
				elem, goSub = f.n, join(goPath, f.goName)
			}
		}
		if doc {
			policy, sub, goSub = key, "", ""
		}
		s, err := c.value(elem, policy, sub, goSub, depth+btoi(key == "candidate"))
		if err != nil {
			return err
		}
		if key == "algorithm" {
			algorithm = s
		}
		if doc {
			policy = ""
		}
	}
	if _, err := c.dec.Token(); err != nil { // the closing delimiter
		return docError("invalid JSON: %v", err)
	}
	if n.kind != reflect.Struct {
		return nil
	}
	// an unknown algorithm is the fault, whatever else is missing: the
	// fields required depend on it
	required := []string{"limit"} // a tier
	if _, ok := n.fields["algorithm"]; ok {
		required = []string{"algorithm", "limit", "window"}
		if slices.Contains(seen, "algorithm") && n.fields["rules"].n != nil {
			if err := checkAlgorithm(strategy.Algorithm(algorithm)); err != nil {
				fe := asFieldError(err)
				fe.Policy, fe.Field, fe.JSON, fe.json = policy, join(goPath, "Algorithm"), join(path, "algorithm"), true
				return fe
			}
			if algorithm == string(Multi) {
				required = []string{"rules"}
			}
		}
	}
	for _, r := range required {
		if !slices.Contains(seen, r) {
			return fail(policy, join(path, r), join(goPath, n.fields[r].goName), "missing")
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// prefixOf returns a JSON value for an error message: as is when short,
// its first bytes then "..." otherwise.
func prefixOf(v []byte) string {
	if len(v) <= quote.MaxBytes {
		return string(v)
	}
	return string(v[:quote.MaxBytes]) + "..."
}

// tokenText returns a JSON token for an error message, bounded.
func tokenText(tok json.Token) string {
	switch t := tok.(type) {
	case string:
		return quote.Value(t)
	case json.Number:
		return prefixOf([]byte(t))
	}
	return fmt.Sprint(tok)
}
