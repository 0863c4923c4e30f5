package strategy

import "errors"

// Errors returned by strategies. Each returned error wraps one of these and
// names the offending field or value; test with errors.Is.
var (
	// ErrInvalidLimit: a Limit field is out of range.
	ErrInvalidLimit = errors.New("ratelimit: invalid limit")
	// ErrInvalidKey: a subject key is empty or too long.
	ErrInvalidKey = errors.New("ratelimit: invalid key")
	// ErrInvalidCost: a request's cost n is negative or too large.
	ErrInvalidCost = errors.New("ratelimit: invalid cost")
	// ErrInvalidOption: an option value is out of range.
	ErrInvalidOption = errors.New("ratelimit: invalid option")
	// ErrBackend: the backend (Redis) failed or answered something the
	// strategy does not understand. The underlying error is wrapped too, so
	// errors.Is(err, context.DeadlineExceeded) works. A strategy called
	// directly cannot tell its caller's context ending from the backend
	// failing, and wraps both; a Limiter built by ratelimit.New or
	// ratelimit.Wrap returns the caller's own cancellation or deadline as
	// an error wrapping ctx.Err() alone, so that there ErrBackend always
	// means the backend.
	ErrBackend = errors.New("ratelimit: backend error")
	// ErrNotReplicated: in the durability mode (WithReplicas), fewer
	// replicas than required acknowledged a decision within the timeout.
	// Such an error wraps ErrBackend too.
	ErrNotReplicated = errors.New("ratelimit: not replicated")
)
