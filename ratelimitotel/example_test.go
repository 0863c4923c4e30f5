package ratelimitotel_test

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/ratelimitotel"
)

// A limiter reporting to OpenTelemetry. A service passes its own
// MeterProvider and TracerProvider, or none to use the globals; here an
// in-memory SDK shows what is recorded.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))

	obs, err := ratelimitotel.New(ratelimitotel.WithMeterProvider(mp), ratelimitotel.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}

	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	limiter, err := ratelimit.New(rdb, ratelimit.Config{
		Name:      "login",
		Algorithm: ratelimit.SlidingLog,
		Limit:     3,
		Window:    time.Minute,
		Timeout:   10 * time.Second, // generous: the example must never degrade
	}, ratelimit.WithObserver(obs))
	if err != nil {
		panic(err)
	}

	ctx, request := tp.Tracer("example").Start(context.Background(), "POST /login")
	for i := 0; i < 5; i++ {
		limiter.Allow(ctx, "user:42")
	}
	request.End()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == ratelimitotel.MetricDecisions {
				for _, p := range sum.DataPoints {
					policy, _ := p.Attributes.Value(ratelimitotel.AttrPolicy)
					decision, _ := p.Attributes.Value(ratelimitotel.AttrDecision)
					lines = append(lines, fmt.Sprintf("%s{policy=%s, decision=%s} %d", m.Name, policy.String(), decision.String(), p.Value))
				}
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	ended := spans.Ended()
	for _, s := range ended[:len(ended)-1] { // the last one is the request's
		fmt.Println(s.Name(), "child of", s.Parent().SpanID() == request.SpanContext().SpanID())
	}
	// Output:
	// ratelimit.decisions{policy=login, decision=allowed} 3
	// ratelimit.decisions{policy=login, decision=denied} 2
	// ratelimit.allow child of true
	// ratelimit.allow child of true
	// ratelimit.allow child of true
	// ratelimit.allow child of true
	// ratelimit.allow child of true
}
