//go:build !race

package collector

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = false
