//go:build race

package conformance

// raceEnabled: the race detector allocates on its own, so allocation
// checks are left out under it.
const raceEnabled = true
