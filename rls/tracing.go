package rls

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// SpanName is the name of the span of each ShouldRateLimit call.
const SpanName = "rls.ShouldRateLimit"

// Span attribute keys, beside AttrDomain.
const (
	AttrDescriptors = attribute.Key("rls.descriptors")  // the request's descriptor count
	AttrOverallCode = attribute.Key("rls.overall_code") // OK or OVER_LIMIT
)

// WithTracerProvider sets the TracerProvider of the Server's spans
// (default: the otel global one). Each ShouldRateLimit call is a server
// span, the child of the W3C trace context Envoy sends in the gRPC
// metadata (traceparent) when it traces; the limiters' decision spans
// (ratelimitotel, given the same provider) are its children.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *Server) {
		if tp != nil {
			s.tp = tp
		}
	}
}

// mdCarrier reads a trace context from incoming gRPC metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

var propagator = propagation.TraceContext{}

// startSpan starts the span of a call, the child of the caller's trace
// context when it sent one.
func (s *Server) startSpan(ctx context.Context) (context.Context, trace.Span) {
	if md, ok := metadata.FromIncomingContext(ctx); ok && !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = propagator.Extract(ctx, mdCarrier(md))
	}
	return s.tracer.Start(ctx, SpanName, trace.WithSpanKind(trace.SpanKindServer))
}

func endSpan(span trace.Span, domain string, req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(AttrDomain.String(domain), AttrDescriptors.Int(len(req.GetDescriptors())))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, err.Error())
	} else {
		span.SetAttributes(AttrOverallCode.String(resp.GetOverallCode().String()))
	}
	span.End()
}

func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}
