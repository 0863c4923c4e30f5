package ratelimit

import (
	"errors"
	"reflect"
	"strings"
	"sync"

	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/internal/quote"
	"github.com/ratekit/ratelimit/strategy"
)

// FieldError is an invalid Config field or policy; errors.As finds it in
// the errors of New, Wrap, NewSet, Set.Update and Policies.UnmarshalJSON,
// and it wraps the sentinel (strategy.ErrInvalidLimit...). A Config's error
// names Go fields ("ratelimit: invalid limit: Window must be > 0, got 0s");
// a policy's names it and the JSON path (`ratelimit: policy "login": field
// "window": ...`), in JSON terms when it comes from a document.
type FieldError struct {
	Policy string // the policy's name; "" for New and Wrap
	Field  string // the Go path: "Tiers.pro.Limit"; "" for the policy as a whole
	JSON   string // the JSON path: "tiers.pro.limit", "rules[1].window"
	Err    error  // what is wrong

	sentinel error                                 // with text: the sentinel Err wraps
	text     func(name func(string) string) string // the message after the sentinel's, with the field names given; nil: Err's message
	json     bool                                  // read from a policy document: the message names JSON fields
	inSet    bool                                  // of a policy (Policy may be "", an invalid name)
}

// Error returns the message, as the type's doc describes.
func (e *FieldError) Error() string {
	if !e.inSet && !e.json {
		return e.Err.Error()
	}
	var b strings.Builder
	b.WriteString("ratelimit: policy ")
	b.WriteString(quote.Value(e.Policy))
	b.WriteString(": ")
	if e.JSON != "" {
		b.WriteString("field ")
		b.WriteString(quote.Value(e.JSON))
		b.WriteString(": ")
	}
	if e.text == nil {
		b.WriteString(e.Err.Error())
		return b.String()
	}
	names := fielderr.Go
	if e.json {
		names = jsonName
	}
	b.WriteString(sentinelName(e.sentinel))
	b.WriteString(": ")
	b.WriteString(e.text(names))
	return b.String()
}

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// sentinelName returns what a sentinel's message says after the package
// name, so that a policy's message has one prefix.
func sentinelName(s error) string {
	switch s {
	case strategy.ErrInvalidLimit:
		return "invalid limit"
	case strategy.ErrInvalidOption:
		return "invalid option"
	case strategy.ErrInvalidKey:
		return "invalid key"
	case strategy.ErrInvalidCost:
		return "invalid cost"
	}
	return s.Error()
}

// newFieldError returns the *FieldError of the field at goPath (jsonPath
// in JSON): the sentinel's message, then what text writes with the field
// names it is given.
func newFieldError(sentinel error, goPath, jsonPath string, text func(name func(string) string) string) *FieldError {
	leaf := goPath[strings.LastIndexByte(goPath, '.')+1:]
	return &FieldError{Field: goPath, JSON: jsonPath, Err: fielderr.New(sentinel, "", leaf, text),
		sentinel: sentinel, text: text}
}

// asFieldError returns the *FieldError err holds, or one for the field
// that a strategy's error names (an invalid Limit, Window, Burst or
// Prefix), or nil when err names no field.
func asFieldError(err error) *FieldError {
	if fe := (*FieldError)(nil); errors.As(err, &fe) {
		return fe
	}
	if fe := (*fielderr.Error)(nil); errors.As(err, &fe) {
		return &FieldError{Field: fe.Field, JSON: jsonName(fe.Field), Err: err, sentinel: fe.Sentinel, text: fe.Detail}
	}
	return nil
}

// within returns fe as a field of the Config field parent ("Candidate"),
// err its Go error and suffix what its message adds, with the names given.
func (fe *FieldError) within(parent string, err error, suffix func(name func(string) string) string) *FieldError {
	out := &FieldError{Field: parent + "." + fe.Field, JSON: jsonName(parent) + "." + fe.JSON, Err: err, sentinel: fe.sentinel}
	if text := fe.text; text != nil {
		out.text = func(name func(string) string) string { return text(name) + suffix(name) }
	}
	return out
}

// ofPolicy returns err, from validating or building policy name, as a
// *FieldError of that policy (a copy: err is not changed).
func ofPolicy(name string, err error) *FieldError {
	fe := asFieldError(err)
	if fe == nil {
		return &FieldError{Policy: name, Err: err, inSet: true}
	}
	c := *fe
	c.Policy, c.inSet = name, true
	return &c
}

// jsonNames maps the Go name of each Config field to its JSON name, from
// the struct tags of policyDoc.
var jsonNames = sync.OnceValue(func() map[string]string {
	t := reflect.TypeFor[policyDoc]()
	names := make(map[string]string, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names[f.Name] = name
	}
	return names
})

// jsonName returns the JSON name of the Config field named goName, or
// goName when it has none.
func jsonName(goName string) string {
	if n, ok := jsonNames()[goName]; ok {
		return n
	}
	return goName
}
