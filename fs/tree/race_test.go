//go:build race

package tree

// raceEnabled shortens the random model tests under -race, which runs
// their byte loops ten times slower; the plain run keeps the full length.
const raceEnabled = true
