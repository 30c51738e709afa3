//go:build !race

package rewind

const raceEnabled = false
