// Package fielderr is the error of one invalid field of a limit or an
// option, shared by the strategy packages and the facade: it says which
// field is at fault, and writes its message with the field names given by
// its reader, so that the facade can name a field as Go does ("Window") or
// as a policy document does ("window") without reading any message text.
package fielderr

// Error is an invalid value of the field Field (its Go name, "Window").
// Its message is Sentinel's, ": ", Scope ("compactlog: " or ""), then what
// Text writes with the field names it is given ("Window must be > 0, got
// 0s"). It wraps Sentinel.
type Error struct {
	Sentinel error
	Field    string
	Scope    string
	Text     func(name func(string) string) string
}

// New returns an *Error of field in scope, with the message text writes.
func New(sentinel error, scope, field string, text func(name func(string) string) string) *Error {
	return &Error{Sentinel: sentinel, Field: field, Scope: scope, Text: text}
}

// Go returns a Go name as is.
func Go(name string) string { return name }

// Detail returns the message after the sentinel's, with the field names
// written by name.
func (e *Error) Detail(name func(string) string) string { return e.Scope + e.Text(name) }

func (e *Error) Error() string { return e.Sentinel.Error() + ": " + e.Detail(Go) }

func (e *Error) Unwrap() error { return e.Sentinel }
