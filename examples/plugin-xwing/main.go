// Command plugin-xwing is a regroup algorithm plugin serving the X-Wing
// Welcome wrappers of adapters/pqwrap: WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6
// (KEM id 0x004D) and the canonical 0x647A algorithm.
//
// Build it into the host's plugin directory under a name starting with
// "regroup-plugin-":
//
//	go build -o /var/lib/regroup/plugins/regroup-plugin-xwing ./examples/plugin-xwing
//
// docs/plugin-guide.md walks through writing, testing and deploying one.
package main

import (
	"github.com/regroup-mls/regroup/adapters/pqwrap"
	"github.com/regroup-mls/regroup/plugins/sdk"
)

func main() { sdk.Serve(pqwrap.NewXWing(), pqwrap.NewXWingCanonical()) }
