package breaker_test

import (
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/strategy"
)

// stepClock is a Clock that tests step; safe for concurrent use.
type stepClock struct{ ns atomic.Int64 }

func (c *stepClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *stepClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestNewInvalid(t *testing.T) {
	for _, c := range []struct {
		name     string
		failures int
		cooldown time.Duration
	}{
		{"failures < 0", -1, 0},
		{"failures too many", 1<<30 + 1, 0},
		{"cooldown < 0", 0, -time.Second},
		{"cooldown > MaxCooldown", 0, breaker.MaxCooldown + 1},
		{"cooldown overflowing", 0, math.MaxInt64},
	} {
		if _, err := breaker.New(c.failures, c.cooldown); !errors.Is(err, strategy.ErrInvalidOption) {
			t.Errorf("%s: err = %v, want ErrInvalidOption", c.name, err)
		}
	}
	b, err := breaker.New(0, 0, nil, breaker.WithClock(nil))
	if err != nil {
		t.Fatal(err)
	}
	if b.Failures() != breaker.DefaultFailures || b.Cooldown() != breaker.DefaultCooldown {
		t.Errorf("defaults: %d, %v; want %d, %v", b.Failures(), b.Cooldown(), breaker.DefaultFailures, breaker.DefaultCooldown)
	}
}

// The breaker's life: closed until failures in a row, open for the
// cool-down on its clock, then one probe at a time.
func TestStates(t *testing.T) {
	clock := &stepClock{}
	b, err := breaker.New(2, time.Minute, breaker.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	call := func(o breaker.Outcome) bool {
		ok, probe := b.Allow()
		if ok {
			b.Record(probe, o)
		}
		return ok
	}
	want := func(step string, s breaker.State, retry time.Duration) {
		t.Helper()
		if got := b.State(); got != s {
			t.Fatalf("%s: state %v, want %v", step, got, s)
		}
		if got := b.RetryAfter(); got != retry {
			t.Fatalf("%s: RetryAfter %v, want %v", step, got, retry)
		}
	}
	want("new", breaker.Closed, time.Minute)
	call(breaker.Failed)
	call(breaker.Answered) // an answer resets the count
	call(breaker.Failed)
	call(breaker.Abandoned) // says nothing
	want("one failure in a row", breaker.Closed, time.Minute)
	call(breaker.Failed)
	want("two failures in a row", breaker.Open, time.Minute)
	if call(breaker.Answered) {
		t.Fatal("an open breaker let a call through")
	}
	clock.advance(time.Minute - time.Millisecond/2)
	want("0.5ms before the end of the cool-down", breaker.Open, time.Millisecond)
	clock.advance(time.Millisecond / 2)
	want("the cool-down ended", breaker.HalfOpen, time.Millisecond)
	ok, probe := b.Allow()
	if !ok || !probe {
		t.Fatalf("half-open: Allow = %v, %v; want a probe", ok, probe)
	}
	if ok, _ := b.Allow(); ok {
		t.Fatal("half-open: a second call went through during the probe")
	}
	b.Record(true, breaker.Failed)
	want("the probe failed", breaker.Open, time.Minute)
	clock.advance(time.Minute)
	if !call(breaker.Abandoned) {
		t.Fatal("no probe after the second cool-down")
	}
	want("the probe was abandoned", breaker.HalfOpen, time.Millisecond)
	if !call(breaker.Answered) {
		t.Fatal("no probe after an abandoned one")
	}
	want("the probe answered", breaker.Closed, time.Minute)
	if s := breaker.State(7).String(); s != "State(7)" {
		t.Errorf("State(7).String() = %q", s)
	}
}
