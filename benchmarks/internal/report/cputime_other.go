//go:build !linux

package report

import "time"

// threadCPU is not available here: the local twins are timed by the wall
// clock only.
func threadCPU() (time.Duration, bool) { return 0, false }
