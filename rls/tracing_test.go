package rls_test

import (
	"context"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/metadata"

	"github.com/ratekit/ratelimit/rls"
)

// TestTracing checks the span of a call: a child of the trace context the
// client sent in its metadata, with the domain, the descriptor count and
// the overall code.
func TestTracing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := start(t, shared(t), map[string]string{"t.yaml": "domain: t\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"},
		rls.WithTracerProvider(tp))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	for range 2 {
		if _, err := e.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "t", Descriptors: []*commonv3.RateLimitDescriptor{desc("k", "v")}}); err != nil {
			t.Fatal(err)
		}
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	s := spans[1]
	if s.Name() != rls.SpanName || s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("span %s in trace %s, parent %s: want %s, a child of the client's", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID(), rls.SpanName)
	}
	attrs := attribute.NewSet(s.Attributes()...)
	for k, want := range map[attribute.Key]string{rls.AttrDomain: "t", rls.AttrOverallCode: "OVER_LIMIT"} {
		if v, _ := attrs.Value(k); v.String() != want {
			t.Errorf("attribute %s: got %q, want %q", k, v.String(), want)
		}
	}
}
