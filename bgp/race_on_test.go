//go:build race

package bgp

// raceDetector says whether the tests run with -race.
const raceDetector = true
