// Package cmdline is what every subcommand of bookingledger shares on its command line: flag sets
// whose flags default to BOOKINGLEDGER_… environment variables (EnvFlags), usage errors and the exit
// status of an error (ExitCode: 0, 1, 2 for usage, 3 for a newer schema), the environment variables
// read by more than one command, JSON output, and the rebuild's progress bar.
package cmdline
