//go:build !race

package main

// raceEnabled says this test binary was built with -race (buildBinary builds the real binary alike).
const raceEnabled = false
