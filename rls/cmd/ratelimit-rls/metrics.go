package main

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/ratelimitotel"
	"github.com/ratekit/ratelimit/rls"
)

// setupTelemetry sets up what the flags and the environment ask for, and
// returns the limiters' options, the Server's, and a stop:
//
// metricsAddr not empty: the Prometheus endpoint /metrics there, with the
// Server's rls.* metrics and every descriptor's ratelimit.* metrics
// (ratelimitotel), through OpenTelemetry's Prometheus exporter. The
// command exports no traces: an OTLP exporter's dependencies would raise
// otelgrpc past what envoyproxy/ratelimit (rls/bench) builds with; a
// program of its own passes rls.WithTracerProvider and
// ratelimitotel.WithTracerProvider.
func setupTelemetry(metricsAddr string) ([]ratelimit.Option, []rls.Option, func(), error) {
	var lopts []ratelimitotel.Option
	var sopts []rls.Option
	var stops []func(context.Context)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, s := range stops {
			s(ctx)
		}
	}
	if metricsAddr != "" {
		mp, err := serveMetrics(metricsAddr, &stops)
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		lopts = append(lopts, ratelimitotel.WithMeterProvider(mp))
		sopts = append(sopts, rls.WithMeterProvider(mp))
	}
	if len(lopts) == 0 {
		return nil, nil, stop, nil
	}
	obs, err := ratelimitotel.New(lopts...)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return []ratelimit.Option{ratelimit.WithObserver(obs)}, sopts, stop, nil
}

// serveMetrics serves /metrics on addr and returns the MeterProvider
// whose metrics it shows.
func serveMetrics(addr string, stops *[]func(context.Context)) (*sdkmetric.MeterProvider, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("ratelimit-rls: metrics: %v", err)
		}
	}()
	log.Printf("ratelimit-rls: metrics on http://%s/metrics", lis.Addr())
	*stops = append(*stops, func(ctx context.Context) { hs.Shutdown(ctx); mp.Shutdown(ctx) })
	return mp, nil
}
