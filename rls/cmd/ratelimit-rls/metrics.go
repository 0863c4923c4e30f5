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

// setupMetrics serves the Prometheus endpoint /metrics on addr (none when
// addr is empty): the Server's rls.* metrics and every descriptor's
// ratelimit.* metrics (ratelimitotel), through OpenTelemetry's Prometheus
// exporter. It returns the limiters' options, the Server's, and a stop.
func setupMetrics(addr string) ([]ratelimit.Option, []rls.Option, func(), error) {
	if addr == "" {
		return nil, nil, func() {}, nil
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	obs, err := ratelimitotel.New(ratelimitotel.WithMeterProvider(mp))
	if err != nil {
		return nil, nil, nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, nil, err
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
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		mp.Shutdown(ctx)
	}
	return []ratelimit.Option{ratelimit.WithObserver(obs)}, []rls.Option{rls.WithMeterProvider(mp)}, stop, nil
}
