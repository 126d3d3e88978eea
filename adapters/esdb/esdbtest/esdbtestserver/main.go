// Command esdbtestserver serves esdbtest nodes for the test binaries of other packages, outside them:
// built without -race, the server's gRPC work costs a fraction of what it costs inside a
// race-instrumented test binary. A test binary starts it when BOOKINGLEDGER_TEST_ESDB_SERVER names it
// (scripts/test.sh builds it for `make test`) and controls it through its standard input and output
// (esdbtest.ServeControl); it exits when its standard input ends, with the test binary.
package main

import (
	"fmt"
	"os"

	"bookingledger/adapters/esdb/esdbtest"
)

func main() {
	if err := esdbtest.ServeControl(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "esdbtestserver:", err)
		os.Exit(1)
	}
}
