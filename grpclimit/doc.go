// Package grpclimit rate-limits the calls of a gRPC server with the
// limiters of package ratelimit: unary and stream server interceptors, and
// an adapter for go-grpc-middleware's ratelimit interceptors. It is a module
// of its own, github.com/ratekit/ratelimit/grpclimit, so that the library
// never pulls in gRPC.
//
// # Policies
//
// New limits every method with one Limiter. NewSet picks a policy of a
// ratelimit.Set per full method name ("/pkg.Service/Method"), or per
// service ("/pkg.Service/*"), with a default for the methods not listed
// (or none: those are not limited). Methods that share a policy share each
// caller's quota; give a method a policy of its own for a quota of its own.
//
// # Keys
//
// Each call is charged to a subject key, as in package httplimit and with
// the same key strings, so that one policy used by an HTTP handler and a
// gRPC method gives a caller one quota:
//
//   - by default the peer's IP address ("ip:203.0.113.7"; an IPv6 peer by
//     its /64, "ip:2001:db8:1:2::/64", see WithIPv6Prefix);
//   - behind proxies (WithTrustedProxies), the client address that the
//     trusted proxies wrote in the x-forwarded-for (or forwarded) metadata,
//     by httplimit.ClientIP's rules: the metadata is read only when the
//     peer is a trusted proxy, and of its hops the right-most one that is
//     not a trusted proxy is the client, so a caller cannot choose its
//     subject by sending the metadata itself;
//   - a metadata value, an API key (WithKeyMetadata: "header:<value>", the
//     key httplimit.WithKeyHeader gives the same value), falling back to
//     the peer's IP when the call has none;
//   - whatever a KeyFunc returns (WithKeyFunc).
//
// A call costs 1 unit, or what a CostFunc returns (WithCost).
//
// Chain the interceptors after those that authenticate the caller when the
// key comes from what they check, and before the expensive ones. Handlers
// read the decision with ResultFromContext.
//
// # Streams
//
// The stream interceptor makes one decision when a stream starts, charged
// like a unary call (the CostFunc sees no request message): a stream that
// is allowed then sends and receives as many messages as it likes for as
// long as it lasts. To limit messages within a stream, call a Limiter in the
// handler.
//
// # Responses
//
// Every decided call carries response header metadata with the values of
// draft-ietf-httpapi-ratelimit-headers-11, the same as httplimit's header
// fields (see there for q, w, r and t):
//
//	ratelimit-policy: "login";q=5;w=60
//	ratelimit: "login";r=0;t=42
//
// A denial is a status with code ResourceExhausted and two details:
//
//   - google.rpc.RetryInfo, whose retry_delay is Result.RetryAfter (to the
//     millisecond, not rounded to seconds): the earliest the same call can
//     pass. It is left out when the call can never pass (its cost exceeds
//     the capacity: RetryAfter is strategy.Never).
//   - google.rpc.QuotaFailure with one violation: subject "policy:<name>",
//     quota_id the policy's name, quota_value its capacity (q), and a
//     description. The caller's key is never echoed: it may be an API key.
//
// RetryAfter (in this package) reads the delay from a client's error, and
// RetryUnary is a client interceptor that waits it and retries.
//
// # Failures
//
// A Limiter built by ratelimit.New does not fail when Redis does: its
// FailurePolicy decides, and the interceptors follow that decision
// (Result.Degraded), leaving out the ratelimit metadata, whose remaining
// count nobody knows then:
//
//   - FailOpen: the call passes;
//   - FailLocal: the in-process twin decides; its denials are
//     ResourceExhausted as above;
//   - FailClosed: the call is refused with code Unavailable, not
//     ResourceExhausted, and a RetryInfo of the time until Redis is tried
//     again, without QuotaFailure. The caller has exceeded no quota: the
//     server's limiter is down, which is what Unavailable means in gRPC
//     ("transient, retry with a backoff"), and clients and proxies that
//     count ResourceExhausted against the caller, or stop retrying on it,
//     would blame the wrong party.
//
// An error that does reach the interceptors (the call's context ended, no
// key could be derived, a negative cost, a Limiter without a failure
// policy) goes to the ErrorHandler: by default Canceled or DeadlineExceeded
// for the context's errors, InvalidArgument when no key could be derived
// (ErrKey), Unavailable when the store failed (strategy.ErrBackend), and
// Internal otherwise. PassThrough serves such calls unlimited instead.
//
// An Interceptor is safe for concurrent use.
package grpclimit
