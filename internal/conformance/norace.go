//go:build !race

package conformance

// raceEnabled: see race.go.
const raceEnabled = false
