//go:build !unix

package report

import "time"

// processCPU is unknown here: the client CPU column stays empty.
func processCPU() time.Duration { return 0 }
