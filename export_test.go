package ratelimit

// DenyCacheLen returns how many subjects l's denial cache holds, or -1 when
// it has none.
func DenyCacheLen(l *Limiter) int {
	if l.fail == nil || l.fail.deny == nil {
		return -1
	}
	return l.fail.deny.Len()
}

// FailLocalSubjects returns how many subjects l's FailLocal twin holds, or
// -1 when it has none.
func FailLocalSubjects(l *Limiter) int {
	if l.fail == nil || l.fail.local == nil {
		return -1
	}
	return l.fail.local.(interface{ Subjects() int }).Subjects()
}

// Inline reports whether l calls its strategy on the caller's goroutine.
func Inline(l *Limiter) bool { return l.fail != nil && l.fail.guard.Inline() }
