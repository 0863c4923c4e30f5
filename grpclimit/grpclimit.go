package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/httplimit"
	"github.com/ratekit/ratelimit/strategy"
)

// Limiter is what the interceptors need of a limiter. *ratelimit.Limiter
// implements it.
type Limiter interface {
	AllowN(ctx context.Context, key string, n int64) (ratelimit.Result, error)
	Config() ratelimit.Config
}

// Call describes the call being limited, for a KeyFunc or a CostFunc.
type Call struct {
	FullMethod string // "/pkg.Service/Method"; "" in Limit when the context holds no method
	Request    any    // a unary call's request message; nil for a stream and in Limit
	Stream     bool   // the call is a stream, decided once at its start
}

// KeyFunc returns the subject key a call is charged to; ctx holds the
// call's peer (peer.FromContext) and incoming metadata
// (metadata.FromIncomingContext). An error sends the call to the
// ErrorHandler, wrapped with ErrKey.
type KeyFunc func(ctx context.Context, c Call) (string, error)

// CostFunc returns the units a call costs (1 by default). A cost of 0
// consumes nothing and passes when one unit would; a negative cost is an
// error for the ErrorHandler.
type CostFunc func(ctx context.Context, c Call) int64

// ErrorHandler decides a call whose limit could not be decided: it returns
// the error to answer with (a status error), or nil to serve the call
// unlimited.
type ErrorHandler func(ctx context.Context, c Call, err error) error

// ErrKey is wrapped by the errors of calls whose subject key could not be
// derived: no IP peer, an over-long metadata value, a KeyFunc's error.
var ErrKey = errors.New("grpclimit: no key for the call")

// DefaultErrorHandler answers with Canceled or DeadlineExceeded when err
// wraps the context's error, InvalidArgument when it wraps ErrKey,
// Unavailable when it wraps strategy.ErrBackend (the limiter's store
// failed), and Internal otherwise. Only the key errors' text is sent.
func DefaultErrorHandler(ctx context.Context, c Call, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, ErrKey):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, strategy.ErrBackend):
		return status.Error(codes.Unavailable, "grpclimit: rate limiter unavailable")
	}
	return status.Error(codes.Internal, "grpclimit: rate limit not decided")
}

// PassThrough is an ErrorHandler that serves the call unlimited, without
// rate-limit metadata.
func PassThrough(ctx context.Context, c Call, err error) error { return nil }

// Option configures an Interceptor.
type Option func(*Interceptor)

// WithKeyFunc charges each call to the key f returns, used as is. A nil f
// is ignored. It replaces WithKeyMetadata.
func WithKeyFunc(f KeyFunc) Option {
	return func(i *Interceptor) {
		if f != nil {
			i.key = f
		}
	}
}

// WithKeyMetadata charges each call to the first value of the incoming
// metadata name (an API key, say), as the key "header:<value>", which is
// the key httplimit.WithKeyHeader gives the same value; a call without it
// is charged to its client IP ("ip:..."), so the two never share a subject.
// Use it only for metadata that something in front has authenticated: a
// caller can send any value and get a fresh subject for each. A value
// longer than strategy.MaxKeyLen minus 7 bytes is an ErrKey. It replaces
// WithKeyFunc. New fails on an empty name.
func WithKeyMetadata(name string) Option {
	return func(i *Interceptor) {
		name = strings.ToLower(name)
		if name == "" {
			i.fail(invalid("WithKeyMetadata: name must not be empty"))
		}
		i.key = func(ctx context.Context, c Call) (string, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			if vs := md.Get(name); len(vs) > 0 && vs[0] != "" {
				if len(vs[0]) > strategy.MaxKeyLen-len("header:") {
					return "", fmt.Errorf("metadata %q is %d bytes, longer than %d", name, len(vs[0]), strategy.MaxKeyLen-len("header:"))
				}
				return "header:" + vs[0], nil
			}
			return i.ipKey(ctx, c)
		}
	}
}

// WithTrustedProxies makes the client IP come from the metadata header
// ("x-forwarded-for", or "forwarded" for RFC 7239's) for calls whose peer is
// in one of cidrs ("10.0.0.0/8", "2001:db8::/32", or a single address),
// read as httplimit.ClientIP reads the HTTP header of that name. Name
// exactly the metadata your proxies set: a caller may send the other one,
// forged. New fails on an empty header or an invalid CIDR.
func WithTrustedProxies(header string, cidrs ...string) Option {
	return func(i *Interceptor) {
		if header == "" {
			i.fail(invalid("WithTrustedProxies: header must not be empty"))
		}
		i.header = textproto.CanonicalMIMEHeaderKey(header)
		i.trusted = i.trusted[:0]
		for _, c := range cidrs {
			p, err := parsePrefix(c)
			if err != nil {
				i.fail(err)
				continue
			}
			i.trusted = append(i.trusted, p)
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
	return netip.Prefix{}, invalid(fmt.Sprintf("WithTrustedProxies: %q is not a CIDR or an IP address", s))
}

// WithIPv6Prefix sets how many leading bits of an IPv6 client address make
// its key (64 by default; 128 keys each address alone). New fails unless
// 1 <= bits <= 128.
func WithIPv6Prefix(bits int) Option {
	return func(i *Interceptor) {
		if bits < 1 || bits > 128 {
			i.fail(invalid(fmt.Sprintf("WithIPv6Prefix: bits must be in [1, 128], got %d", bits)))
		}
		i.v6bits = bits
	}
}

// WithCost charges each call f(ctx, call) units instead of 1. A nil f is
// ignored.
func WithCost(f CostFunc) Option {
	return func(i *Interceptor) {
		if f != nil {
			i.cost = f
		}
	}
}

// WithErrorHandler makes h decide the calls whose limit could not be
// decided instead of DefaultErrorHandler. A nil h is ignored.
func WithErrorHandler(h ErrorHandler) Option {
	return func(i *Interceptor) {
		if h != nil {
			i.onError = h
		}
	}
}

// Routes chooses a policy of a ratelimit.Set for each method (see NewSet).
// The zero Routes limits no method.
type Routes struct {
	// Methods maps a full method name ("/pkg.Service/Method") or a whole
	// service ("/pkg.Service/*") to the name of a policy in the Set. A
	// method's own entry wins over its service's.
	Methods map[string]string
	// Default is the policy of the methods that Methods does not name; ""
	// leaves them unlimited.
	Default string
}

// Interceptor rate-limits the calls of a gRPC server: install Unary and
// Stream with grpc.ChainUnaryInterceptor and grpc.ChainStreamInterceptor,
// or pass it to go-grpc-middleware's ratelimit interceptors (see Limit).
// Build it with New or NewSet. It is safe for concurrent use.
type Interceptor struct {
	methods  map[string]*policy // full method name or "/pkg.Service/" -> policy
	fallback *policy            // nil: methods not in methods are not limited
	key      KeyFunc
	cost     CostFunc
	onError  ErrorHandler
	header   string // canonical forwarding header name; "" when no proxy is trusted
	trusted  []netip.Prefix
	v6bits   int
	err      error
}

// policy is one limiter with what its responses say.
type policy struct {
	lim    Limiter
	cfg    ratelimit.Config
	name   string            // the policy name, as Config.Name or "default"
	fields *httplimit.Fields // the metadata values, as httplimit's headers

	// A policy of a Set (NewSet) is looked up on each call, so that a
	// reload (Set.Update) reaches the interceptor: set and setName say
	// where, live holds the policy of the Limiter seen last.
	set     *ratelimit.Set
	setName string
	live    atomic.Pointer[policy]
}

// current returns the policy that decides now: p itself, or for a policy
// of a Set the one of the Set's Limiter of that name now, remade only when
// a reload replaced the Limiter.
func (p *policy) current() (*policy, error) {
	if p.set == nil {
		return p, nil
	}
	l, err := p.set.Get(p.setName)
	if err != nil {
		return nil, err
	}
	if c := p.live.Load(); c != nil && c.lim == Limiter(l) {
		return c, nil
	}
	c, err := newPolicy(l)
	if err != nil {
		return nil, err
	}
	p.live.Store(c)
	return c, nil
}

func (i *Interceptor) fail(err error) {
	if i.err == nil {
		i.err = err
	}
}

// New returns an Interceptor that limits every method with l. It fails when
// an option is invalid, or when l's Config.Name cannot be a structured-field
// String (printable ASCII only).
func New(l Limiter, opts ...Option) (*Interceptor, error) {
	if v := reflect.ValueOf(l); l == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, invalid("limiter is nil")
	}
	p, err := newPolicy(l)
	if err != nil {
		return nil, err
	}
	return build(nil, p, opts)
}

// NewSet returns an Interceptor that limits each method with the policy of
// set that routes chooses for it, looked up on each call so that a reload
// (Set.Update) takes effect at once; a call whose policy a reload removed
// goes to the ErrorHandler. It fails, naming the entry, when routes
// names a policy that set does not hold or a key that is not a method or a
// service, and when an option is invalid.
func NewSet(set *ratelimit.Set, routes Routes, opts ...Option) (*Interceptor, error) {
	if set == nil {
		return nil, invalid("set is nil")
	}
	built := map[string]*policy{}
	get := func(field, name string) (*policy, error) {
		if p, ok := built[name]; ok {
			return p, nil
		}
		l, err := set.Get(name)
		if err != nil { // it names the policy and lists those there are
			return nil, fmt.Errorf("%w (grpclimit %s)", err, field)
		}
		live, err := newPolicy(l)
		if err != nil {
			return nil, err
		}
		p := &policy{set: set, setName: name}
		p.live.Store(live)
		built[name] = p
		return p, nil
	}
	methods := make(map[string]*policy, len(routes.Methods))
	for _, m := range slices.Sorted(maps.Keys(routes.Methods)) {
		field := fmt.Sprintf("Routes.Methods[%q]", m)
		svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
		if !strings.HasPrefix(m, "/") || !ok || svc == "" || method == "" || strings.Contains(method, "/") ||
			strings.Contains(method, "*") && method != "*" {
			return nil, invalid(fmt.Sprintf("%s: want \"/package.Service/Method\" or \"/package.Service/*\"", field))
		}
		p, err := get(field, routes.Methods[m])
		if err != nil {
			return nil, err
		}
		if method == "*" {
			m = strings.TrimSuffix(m, "*")
		}
		methods[m] = p
	}
	var fallback *policy
	if routes.Default != "" {
		var err error
		if fallback, err = get("Routes.Default", routes.Default); err != nil {
			return nil, err
		}
	}
	return build(methods, fallback, opts)
}

func newPolicy(l Limiter) (*policy, error) {
	cfg := l.Config()
	name := cfg.Name
	if name == "" {
		name = "default"
	}
	fields, err := httplimit.NewFields(cfg)
	if err != nil {
		return nil, invalid(fmt.Sprintf("Config.Name %q cannot be a metadata value", name))
	}
	return &policy{lim: l, cfg: cfg, name: name, fields: fields}, nil
}

func build(methods map[string]*policy, fallback *policy, opts []Option) (*Interceptor, error) {
	i := &Interceptor{methods: methods, fallback: fallback, v6bits: 64, onError: DefaultErrorHandler}
	i.key = i.ipKey
	for _, o := range opts {
		if o != nil {
			o(i)
		}
	}
	if i.err != nil {
		return nil, i.err
	}
	return i, nil
}

// policyFor returns the policy of a full method name, or nil.
func (i *Interceptor) policyFor(method string) *policy {
	if p, ok := i.methods[method]; ok {
		return p
	}
	if j := strings.LastIndexByte(method, '/'); j > 0 {
		if p, ok := i.methods[method[:j+1]]; ok {
			return p
		}
	}
	return i.fallback
}

// Unary returns the unary server interceptor.
func (i *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := i.check(ctx, Call{FullMethod: info.FullMethod, Request: req}, func(md metadata.MD) {
			grpc.SetHeader(ctx, md) // fails only when the headers were sent: not before the handler
		})
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor. It decides once per stream,
// when the stream starts.
func (i *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := i.check(ss.Context(), Call{FullMethod: info.FullMethod, Stream: true}, func(md metadata.MD) {
			ss.SetHeader(md)
		})
		if err != nil {
			return err
		}
		return handler(srv, &stream{ServerStream: ss, ctx: ctx})
	}
}

// stream is a ServerStream whose context holds the decision.
type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }

// Limit decides the call whose context ctx is, for the interceptors of
// github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit,
// whose Limiter interface it implements: pass the Interceptor to their
// UnaryServerInterceptor or StreamServerInterceptor. The method comes from
// grpc.Method(ctx) and the response metadata is set with grpc.SetHeader.
//
// Those interceptors turn any error into their own ResourceExhausted status
// that keeps only the error's text: the RetryInfo and QuotaFailure details
// are lost, and a FailClosed refusal (Unavailable here) or an ErrorHandler's
// status becomes ResourceExhausted too. Limit returns plain errors whose text
// is the status message Unary would send ("... retry after 17s"). Use Unary
// and Stream when you can.
func (i *Interceptor) Limit(ctx context.Context) error {
	method, _ := grpc.Method(ctx)
	_, err := i.check(ctx, Call{FullMethod: method}, func(md metadata.MD) {
		grpc.SetHeader(ctx, md) // fails outside a server call: nothing to set then
	})
	if s, ok := status.FromError(err); ok && err != nil {
		return errors.New(s.Message())
	}
	return err
}

type resultKey struct{}

// ResultFromContext returns the decision the interceptor made for the call
// whose context ctx is, in the handler it wraps (a stream's Context()
// included). It is false for methods that no policy limits, for calls that
// the ErrorHandler let through, and under go-grpc-middleware (see Limit),
// which cannot pass a context on.
func ResultFromContext(ctx context.Context) (ratelimit.Result, bool) {
	r, ok := ctx.Value(resultKey{}).(ratelimit.Result)
	return r, ok
}

// check decides c. It returns the context for the handler, or the error to
// answer with.
func (i *Interceptor) check(ctx context.Context, c Call, setHeader func(metadata.MD)) (context.Context, error) {
	route := i.policyFor(c.FullMethod)
	if route == nil {
		return ctx, nil
	}
	p, err := route.current()
	if err != nil { // the policy was removed by a reload
		return ctx, i.onError(ctx, c, err)
	}
	key, err := i.key(ctx, c)
	if err != nil {
		return ctx, i.onError(ctx, c, fmt.Errorf("%w: %w", ErrKey, err))
	}
	n := int64(1)
	if i.cost != nil {
		n = i.cost(ctx, c)
	}
	res, err := p.lim.AllowN(ctx, key, n)
	if err != nil {
		return ctx, i.onError(ctx, c, err)
	}
	setHeader(p.metadata(res))
	if !res.Allowed {
		return ctx, p.denial(res)
	}
	return context.WithValue(ctx, resultKey{}, res), nil
}

// ipKey is the default KeyFunc: "ip:" and the client address, or its
// prefix for IPv6, as httplimit's.
func (i *Interceptor) ipKey(ctx context.Context, c Call) (string, error) {
	pr, ok := peer.FromContext(ctx)
	if !ok || pr.Addr == nil {
		return "", errors.New("the call has no peer")
	}
	var addr string
	switch a := pr.Addr.(type) {
	case *net.TCPAddr:
		addr = a.AddrPort().String()
	default:
		addr = a.String()
	}
	// httplimit.ClientIP reads RemoteAddr and the forwarding header only, so
	// the same rules hold for gRPC metadata (HTTP/2 header fields as well).
	r := &http.Request{RemoteAddr: addr}
	if i.header != "" {
		md, _ := metadata.FromIncomingContext(ctx)
		if vs := md.Get(i.header); len(vs) > 0 {
			r.Header = http.Header{i.header: vs}
		}
	}
	a, err := httplimit.ClientIP(r, i.header, i.trusted)
	if err != nil {
		return "", fmt.Errorf("peer address %q is not an IP address", addr)
	}
	if a.Is6() && i.v6bits < 128 {
		return "ip:" + netip.PrefixFrom(a, i.v6bits).Masked().String(), nil
	}
	return "ip:" + a.String(), nil
}

// retryText is d rounded up to the millisecond, for messages.
func retryText(d time.Duration) string {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond).String()
}

// invalidOption is a construction error: one package prefix, and
// errors.Is(err, strategy.ErrInvalidOption).
type invalidOption struct{ msg string }

func invalid(msg string) error         { return &invalidOption{msg: "grpclimit: " + msg} }
func (e *invalidOption) Error() string { return e.msg }
func (e *invalidOption) Unwrap() error { return strategy.ErrInvalidOption }
