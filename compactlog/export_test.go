package compactlog

// UseRanges makes l read and write its values by ranges whatever their
// size, so that tests run that path with small limits too.
func UseRanges(l *Limiter) *Limiter {
	l.ranges = 1
	return l
}
