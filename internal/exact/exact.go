// Package exact turns a limit into the integer scale that the token bucket
// and GCRA compute with, so that their scripts stay exact in Lua's float64
// numbers, and holds what else the two share (Spec): their parameters and
// script arguments, the head of their scripts, and their decision over the
// units a subject used, in Go (Decide) and in Lua (decide.lua).
package exact

import (
	"fmt"

	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/strategy"
)

// MaxScaled bounds Capacity × WP: every value the scripts compute then stays
// an integer below 2^53, exact in Lua's float64 numbers.
const MaxScaled = 1 << 51

// Scale is the exact integer form of a limit: one unit of the limit is WP
// scaled units, every millisecond adds LP of them, and the capacity is Full
// of them. The zero Scale is the one of a Limit of 0.
type Scale struct {
	LP, WP   int64
	Capacity int64 // in units of the limit
	Full     int64 // Capacity × WP
}

// DenyAll reports a Limit of 0, which denies every request.
func (s Scale) DenyAll() bool { return s.LP == 0 }

// Of returns the scale of lim, which must be valid, or an error wrapping
// strategy.ErrInvalidLimit when Capacity × WP exceeds MaxScaled.
func Of(lim strategy.Limit) (Scale, error) {
	if lim.Limit == 0 {
		return Scale{}, nil
	}
	w := lim.Window.Milliseconds()
	g := gcd(lim.Limit, w)
	s := Scale{LP: lim.Limit / g, WP: w / g, Capacity: lim.Capacity()}
	if s.WP > MaxScaled/s.Capacity {
		field := "Limit"
		if lim.Burst > 0 {
			field = "Burst"
		}
		return Scale{}, fielderr.New(strategy.ErrInvalidLimit, "", field, func(name func(string) string) string {
			return fmt.Sprintf("%s %d with %s %s cannot be computed exactly: %s × %s/gcd(%s, %s in ms) must be <= 2^51, got %d × %d",
				name(field), s.Capacity, name("Window"), lim.Window, name(field), name("Window"), name("Limit"), name("Window"), s.Capacity, s.WP)
		})
	}
	s.Full = s.Capacity * s.WP
	return s, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// FloorDiv is a / b rounded towards minus infinity, as Lua's
// math.floor(a / b): the window index of a (possibly negative) instant.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
