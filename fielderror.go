package ratelimit

import (
	"errors"
	"reflect"
	"strings"
	"sync"

	"github.com/ratekit/ratelimit/internal/fielderr"
)

// FieldError is an invalid value of one Config field. New, NewLocal, Wrap
// and the Set's constructors return it (inside a *PolicyError for a Set),
// so that errors.As finds the field; it wraps the sentinel
// (strategy.ErrInvalidLimit, strategy.ErrInvalidOption), so errors.Is
// works too. Its message names Go fields; a *PolicyError from
// ParsePolicies names JSON ones.
type FieldError struct {
	Field string // the field's Go path: "Window", "Tiers.pro.Limit", "Candidate.Window"
	JSON  string // its path in a policy document: "window", "tiers.pro.limit", "candidate.window"
	Err   error  // what is wrong with it

	jsonMsg string // Err's message with the JSON names of the fields
}

// Error returns Err's message, e.g. "ratelimit: invalid limit: Window must
// be > 0, got 0s".
func (e *FieldError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// jsonMessage returns the message with the fields named as in JSON.
func (e *FieldError) jsonMessage() string {
	if e.jsonMsg == "" {
		return e.Err.Error()
	}
	return e.jsonMsg
}

// newFieldError returns the *FieldError of the field at goPath (jsonPath
// in JSON): the sentinel's message, ctx (Go) or jsonCtx (JSON), then what
// text writes with the field names it is given.
func newFieldError(sentinel error, goPath, jsonPath, ctx, jsonCtx string, text func(name func(string) string) string) *FieldError {
	leaf := goPath[strings.LastIndexByte(goPath, '.')+1:]
	return &FieldError{Field: goPath, JSON: jsonPath,
		Err:     fielderr.New(sentinel, ctx, leaf, text),
		jsonMsg: sentinel.Error() + ": " + jsonCtx + text(jsonName)}
}

// asFieldError returns the *FieldError err holds, or one for the field
// that a strategy's error names (an invalid Limit, Window, Burst or
// Prefix), or nil when err names no field.
func asFieldError(err error) *FieldError {
	if fe := (*FieldError)(nil); errors.As(err, &fe) {
		return fe
	}
	if fe := (*fielderr.Error)(nil); errors.As(err, &fe) {
		return &FieldError{Field: fe.Field, JSON: jsonName(fe.Field), Err: err,
			jsonMsg: fe.Sentinel.Error() + ": " + fe.Detail(jsonName)}
	}
	return nil
}

// within returns fe as a field of the Config field parent ("Candidate"),
// err its Go error and jsonSuffix added to its JSON message.
func (fe *FieldError) within(parent string, err error, jsonSuffix string) *FieldError {
	return &FieldError{Field: parent + "." + fe.Field, JSON: jsonName(parent) + "." + fe.JSON,
		Err: err, jsonMsg: fe.jsonMessage() + jsonSuffix}
}

// jsonNames maps the Go name of each Config field to its JSON name, from
// the struct tags of policyJSON.
var jsonNames = sync.OnceValue(func() map[string]string {
	t := reflect.TypeFor[policyJSON]()
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
