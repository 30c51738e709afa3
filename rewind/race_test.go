//go:build race

package rewind

// raceEnabled shortens the random model tests under -race, which runs
// their byte loops ten times slower; the plain run keeps the full length.
const raceEnabled = true
