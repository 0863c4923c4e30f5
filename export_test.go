package ratelimit

// DenyCacheLen returns how many subjects l's denial cache holds, or -1 when
// it has none.
func DenyCacheLen(l *Limiter) int {
	if l.fail == nil || l.fail.deny == nil {
		return -1
	}
	return l.fail.deny.len()
}

// FailLocalSubjects returns how many subjects l's FailLocal twin holds, or
// -1 when it has none.
func FailLocalSubjects(l *Limiter) int {
	if l.fail == nil || l.fail.local == nil {
		return -1
	}
	return l.fail.local.(interface{ Subjects() int }).Subjects()
}
