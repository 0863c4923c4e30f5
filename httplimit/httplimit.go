// Package httplimit is net/http middleware that rate-limits requests with a
// ratelimit.Limiter and tells clients where they stand, in the header fields
// of draft-ietf-httpapi-ratelimit-headers-11 (structured fields, RFC 9651):
//
//	RateLimit-Policy: "login";q=5;w=60
//	RateLimit: "login";r=3;t=42
//
// and, on a denial, 429 Too Many Requests with Retry-After.
//
// # Keys
//
// Each request is charged to a subject key: by default the client's IP
// address ("ip:203.0.113.7"; an IPv6 client by its /64, "ip:2001:db8:1:2::/64",
// since one host usually holds a whole /64), or a header's value
// (WithKeyHeader), or whatever a KeyFunc returns (WithKeyFunc).
//
// The client IP is the TCP peer (http.Request.RemoteAddr) unless the caller
// names its reverse proxies with WithTrustedProxies: only then, and only for
// requests whose peer is one of them, is the forwarding header believed, and
// of its hops the right-most one that is not a trusted proxy is the client.
// Hops to the left of it were written by the client and may be forged; a
// forwarding header from an untrusted peer is ignored whole. See ClientIP.
//
// # Headers
//
// Every decided response carries RateLimit-Policy and, unless the decision
// was degraded, RateLimit; WithLegacyHeaders adds X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset. The values:
//
//   - the policy name is Config.Name ("default" when empty), as a String;
//   - q is the capacity the limiter reports (Result.Limit: Limit, or Burst
//     for the algorithms that have one; Config.Limit for a decision degraded
//     under ratelimit.FailLocal, whose Result.Limit is the local share);
//   - w is the time, in whole seconds rounded up, in which the limit grants q
//     units: Window when q is Limit, Window x q / Limit for a burst;
//   - r is Result.Remaining, the units left after this request;
//   - t on an allowed response is Result.ResetAfter in whole seconds
//     rounded up: the time until the subject is back to full capacity (for
//     the sliding log, until its newest unit leaves the window; for the fixed
//     window, the window's end; for the sliding counter, the end of the
//     window by which its estimate is back to 0; for the token bucket and
//     GCRA, until the bucket is full again);
//   - Retry-After (denials only) is Result.RetryAfter in whole seconds
//     rounded up, at least 1. A request that can never pass (its cost exceeds
//     the capacity: RetryAfter is strategy.Never) is denied without
//     Retry-After;
//   - t on a denial with Retry-After is the same number as Retry-After: the
//     draft (section 6) says Retry-After SHOULD NOT reference a point earlier
//     than the end of the effective window, and the window that matters to
//     the denied client ends when that request can pass, usually long before
//     the subject is back to full capacity.
//
// The legacy X-RateLimit-Reset is t, in seconds from now (not a Unix time).
// The partition key parameter (pk) is never sent: it would echo the subject.
//
// # Failures
//
// A Limiter built by ratelimit.New does not fail when Redis does: its
// FailurePolicy decides, and the middleware follows that decision like any
// other (a degraded allowed request passes, a degraded denial is a 429 with
// Retry-After the time until Redis is tried again), leaving out the RateLimit
// field, whose remaining count nobody knows then. An error that does reach
// the middleware (the request's context ended before the decision, a key
// that cannot be derived, an invalid cost, a Limiter without a failure
// policy) goes to the ErrorHandler. DefaultErrorHandler answers a request
// whose own context was canceled (the client went away) with
// StatusClientClosedRequest (499) and no body, one whose context's
// deadline passed with 503 Service Unavailable as http.TimeoutHandler
// does, a failure of the limiter's store (strategy.ErrBackend) with 503,
// anything else with 500. None of the first two is a failure of the store:
// the facade reports them as the caller's, not as strategy.ErrBackend.
// PassThrough serves such requests unlimited instead.
//
// # Reloads
//
// New decides with the one Limiter it is given. NewForPolicy decides with a
// policy of a ratelimit.Set, looked up on each request, so that the Set's
// Update (a hot reload of the policies) reaches the middleware: each request
// is decided, and its headers written, by the policy in force when it
// arrives. Following the Set costs one atomic load and a map lookup per
// request, and no allocation.
//
// A Middleware is safe for concurrent use.
package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"strconv"
	"sync/atomic"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// Limiter is what the middleware needs of a limiter. *ratelimit.Limiter
// implements it.
type Limiter interface {
	AllowN(ctx context.Context, key string, n int64) (ratelimit.Result, error)
	Config() ratelimit.Config
}

// KeyFunc returns the subject key a request is charged to. An error makes
// the request go to the ErrorHandler, wrapped with ErrKey.
type KeyFunc func(r *http.Request) (string, error)

// CostFunc returns the units a request costs (1 by default). A cost of 0
// consumes nothing and passes when one unit would; a negative cost is an
// error for the ErrorHandler.
type CostFunc func(r *http.Request) int64

// ErrorHandler answers a request whose limit could not be decided: it may
// write an error, or serve the request unlimited with next.ServeHTTP(w, r).
type ErrorHandler func(w http.ResponseWriter, r *http.Request, next http.Handler, err error)

// ErrKey is wrapped by the errors of requests whose subject key could not be
// derived: an unparsable RemoteAddr, or a KeyFunc's error.
var ErrKey = errors.New("httplimit: no key for the request")

// StatusClientClosedRequest is the status DefaultErrorHandler sets, with
// no body, for a request whose context was canceled before its decision:
// the client went away, so nobody reads the response, and the status
// (nginx's 499 Client Closed Request) tells access logs and metrics that
// it was neither served nor a failure of the server.
const StatusClientClosedRequest = 499

// DefaultErrorHandler answers a request whose limit could not be decided:
//   - its context canceled (the client went away): StatusClientClosedRequest,
//     no body;
//   - its context's deadline passed: 503 Service Unavailable, "request
//     deadline exceeded", as http.TimeoutHandler answers;
//   - the limiter's store failed (err wraps strategy.ErrBackend): 503
//     Service Unavailable, "rate limiter unavailable";
//   - anything else: 500 Internal Server Error.
//
// The body says no more than that.
func DefaultErrorHandler(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	switch callerEnded(r, err) {
	case context.Canceled:
		w.WriteHeader(StatusClientClosedRequest)
		return
	case context.DeadlineExceeded:
		http.Error(w, "request deadline exceeded", http.StatusServiceUnavailable)
		return
	}
	if errors.Is(err, strategy.ErrBackend) {
		http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
		return
	}
	http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
}

// callerEnded returns context.Canceled or context.DeadlineExceeded when err
// is the end of r's own context, nil otherwise: the facade's error for it
// wraps the context's error and not strategy.ErrBackend; a strategy's
// wraps both, and is the request's when r's context has ended.
func callerEnded(r *http.Request, err error) error {
	for _, e := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) && (!errors.Is(err, strategy.ErrBackend) || errors.Is(r.Context().Err(), e)) {
			return e
		}
	}
	return nil
}

// PassThrough is an ErrorHandler that serves the request unlimited, without
// rate-limit headers.
func PassThrough(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	next.ServeHTTP(w, r)
}

// DefaultDenyHandler answers a denied request: 429 Too Many Requests with a
// short text body. The middleware has set Retry-After and the rate-limit
// headers already.
func DefaultDenyHandler(w http.ResponseWriter, r *http.Request) {
	msg := "rate limit exceeded"
	if res, ok := ResultFromContext(r.Context()); ok && res.RetryAfter == strategy.Never {
		msg = "request exceeds the rate limit's capacity"
	}
	http.Error(w, msg, http.StatusTooManyRequests)
}

// Option configures a Middleware.
type Option func(*Middleware)

// WithKeyFunc charges each request to the key f returns, used as is. A nil
// f is ignored. It replaces WithKeyHeader.
func WithKeyFunc(f KeyFunc) Option {
	return func(m *Middleware) {
		if f != nil {
			m.key = f
		}
	}
}

// WithKeyHeader charges each request to the value of the header name (an
// API key, say), as the key "header:<value>"; a request without it is
// charged to its client IP ("ip:..."), so the two never share a subject.
// Use it only for a header that something in front has authenticated: a
// client can send any value and get a fresh subject for each. It replaces
// WithKeyFunc.
func WithKeyHeader(name string) Option {
	return func(m *Middleware) {
		m.key = func(r *http.Request) (string, error) {
			if v := r.Header.Get(name); v != "" {
				return "header:" + v, nil
			}
			return m.ipKey(r)
		}
	}
}

// WithTrustedProxies makes the client IP come from the forwarding header
// header ("X-Forwarded-For", or "Forwarded" for RFC 7239's) for requests
// whose peer is in one of cidrs ("10.0.0.0/8", "2001:db8::/32", or a
// single address); see ClientIP. Name exactly the header your proxies set:
// a client may send the other one, forged. New fails on an invalid CIDR.
func WithTrustedProxies(header string, cidrs ...string) Option {
	return func(m *Middleware) {
		m.header = textproto.CanonicalMIMEHeaderKey(header)
		m.trusted = m.trusted[:0]
		for _, c := range cidrs {
			p, err := parsePrefix(c)
			if err != nil {
				m.err = errors.Join(m.err, err)
				continue
			}
			m.trusted = append(m.trusted, p)
		}
		if m.header == "" && m.err == nil {
			m.err = fmt.Errorf("%w: WithTrustedProxies: header must not be empty", strategy.ErrInvalidOption)
		}
	}
}

func parsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("%w: WithTrustedProxies: %q is not a CIDR or an IP address", strategy.ErrInvalidOption, s)
}

// WithIPv6Prefix sets how many leading bits of an IPv6 client address make
// its key (64 by default; 128 keys each address alone). New fails unless
// 1 <= bits <= 128.
func WithIPv6Prefix(bits int) Option {
	return func(m *Middleware) {
		if (bits < 1 || bits > 128) && m.err == nil {
			m.err = fmt.Errorf("%w: WithIPv6Prefix: bits must be in [1, 128], got %d", strategy.ErrInvalidOption, bits)
		}
		m.v6bits = bits
	}
}

// WithCost charges each request f(r) units instead of 1. A nil f is ignored.
func WithCost(f CostFunc) Option {
	return func(m *Middleware) {
		if f != nil {
			m.cost = f
		}
	}
}

// WithLegacyHeaders adds X-RateLimit-Limit (q), X-RateLimit-Remaining (r)
// and X-RateLimit-Reset (t, seconds from now) for clients that predate the
// draft.
func WithLegacyHeaders() Option {
	return func(m *Middleware) { m.legacy = true }
}

// WithDenyHandler makes h answer denied requests instead of
// DefaultDenyHandler. The headers are set when h runs, and
// ResultFromContext(r.Context()) holds the decision. A nil h is ignored.
func WithDenyHandler(h http.Handler) Option {
	return func(m *Middleware) {
		if h != nil {
			m.deny = h
		}
	}
}

// WithErrorHandler makes h answer requests whose limit could not be decided
// instead of DefaultErrorHandler. A nil h is ignored.
func WithErrorHandler(h ErrorHandler) Option {
	return func(m *Middleware) {
		if h != nil {
			m.onError = h
		}
	}
}

// Middleware rate-limits the requests of the handlers it wraps. Build it
// with New (one Limiter) or NewForPolicy (a policy of a ratelimit.Set,
// following its reloads); one Middleware can wrap many handlers, which then
// share its limiter. It is safe for concurrent use.
type Middleware struct {
	cur     atomic.Pointer[bound] // the limiter deciding now, and its fields
	set     *ratelimit.Set        // NewForPolicy: where the limiter comes from, per request
	policy  string
	key     KeyFunc
	cost    CostFunc
	header  string
	trusted []netip.Prefix
	v6bits  int
	legacy  bool
	deny    http.Handler
	onError ErrorHandler
	err     error
}

// bound is a limiter with the field values of its policy.
type bound struct {
	lim    Limiter
	src    *ratelimit.Limiter // NewForPolicy: the Set's Limiter lim is
	fields *Fields
}

// New returns a Middleware that decides with l. It fails when an option is
// invalid, or when l's Config.Name cannot be a structured-field String
// (printable ASCII only).
func New(l Limiter, opts ...Option) (*Middleware, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: limiter is nil", strategy.ErrInvalidOption)
	}
	m, err := newMiddleware(opts)
	if err != nil {
		return nil, err
	}
	fields, err := NewFields(l.Config())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", strategy.ErrInvalidOption, err)
	}
	m.cur.Store(&bound{lim: l, fields: fields})
	return m, nil
}

// NewForPolicy returns a Middleware that decides with the Limiter of the
// named policy of set, looked up on each request (an atomic load and a map
// lookup), so that set.Update reaches it: a request decided before the
// update is decided by the old policy, one after by the new one, and the
// headers follow (q and w of the policy in force). A request arriving after
// Update removed the policy goes to the ErrorHandler with Get's error, which
// wraps strategy.ErrInvalidOption (500 by default). It fails when the
// policy is not in set now, or when an option is invalid.
func NewForPolicy(set *ratelimit.Set, policy string, opts ...Option) (*Middleware, error) {
	if set == nil {
		return nil, fmt.Errorf("%w: httplimit: set is nil", strategy.ErrInvalidOption)
	}
	m, err := newMiddleware(opts)
	if err != nil {
		return nil, err
	}
	m.set, m.policy = set, policy
	if _, err := m.limiter(); err != nil {
		return nil, err
	}
	return m, nil
}

func newMiddleware(opts []Option) (*Middleware, error) {
	m := &Middleware{v6bits: 64, deny: http.HandlerFunc(DefaultDenyHandler), onError: DefaultErrorHandler}
	m.key = m.ipKey
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	if m.err != nil {
		return nil, m.err
	}
	return m, nil
}

// limiter returns the limiter that decides now, with its fields.
func (m *Middleware) limiter() (*bound, error) {
	b := m.cur.Load()
	if m.set == nil {
		return b, nil
	}
	l, err := m.set.Get(m.policy)
	if err != nil {
		if b != nil {
			m.cur.CompareAndSwap(b, nil) // the policy is gone: let its Limiter go
		}
		return nil, err
	}
	if b != nil && b.src == l {
		return b, nil
	}
	// the policy was reloaded (or this is the first request): the fields
	// of the new Limiter, made once per Limiter
	fields, err := NewFields(l.Config())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", strategy.ErrInvalidOption, err)
	}
	b = &bound{lim: l, src: l, fields: fields}
	m.cur.Store(b)
	return b, nil
}

// Handler returns next wrapped: each request is charged to its key, then
// passed to next when allowed, to the deny handler when not, and to the
// ErrorHandler when the limiter cannot decide.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := m.limiter()
		if err != nil {
			m.onError(w, r, next, err)
			return
		}
		key, err := m.key(r)
		if err != nil {
			m.onError(w, r, next, fmt.Errorf("%w: %w", ErrKey, err))
			return
		}
		n := int64(1)
		if m.cost != nil {
			n = m.cost(r)
		}
		res, err := b.lim.AllowN(r.Context(), key, n)
		if err != nil {
			m.onError(w, r, next, err)
			return
		}
		m.setHeaders(w.Header(), b.fields, res)
		r = r.WithContext(context.WithValue(r.Context(), resultKey{}, res))
		if !res.Allowed {
			m.deny.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type resultKey struct{}

// ResultFromContext returns the decision the middleware made for the
// request whose context ctx is, in the handler it wraps and in the deny
// handler.
func ResultFromContext(ctx context.Context) (ratelimit.Result, bool) {
	r, ok := ctx.Value(resultKey{}).(ratelimit.Result)
	return r, ok
}

// ipKey is the default KeyFunc: "ip:" and the client address, or its
// prefix for IPv6.
func (m *Middleware) ipKey(r *http.Request) (string, error) {
	a, err := ClientIP(r, m.header, m.trusted)
	if err != nil {
		return "", err
	}
	if a.Is6() && m.v6bits < 128 {
		return "ip:" + netip.PrefixFrom(a, m.v6bits).Masked().String(), nil
	}
	return "ip:" + a.String(), nil
}

// setHeaders writes the rate-limit fields of res.
func (m *Middleware) setHeaders(h http.Header, fields *Fields, res ratelimit.Result) {
	q, _, rem, t := fields.values(res)
	h.Set("RateLimit-Policy", fields.Policy(res))
	if v := fields.RateLimit(res); v != "" {
		h.Set("RateLimit", v)
	}
	if m.legacy {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(q, 10))
		if !res.Degraded {
			h.Set("X-RateLimit-Remaining", strconv.FormatInt(rem, 10))
			h.Set("X-RateLimit-Reset", strconv.FormatInt(t, 10))
		}
	}
	if s, ok := fields.RetryAfter(res); ok {
		h.Set("Retry-After", strconv.FormatInt(s, 10))
	}
}
