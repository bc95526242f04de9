package sdk

import (
	"os"
	"time"
)

// watchHost exits the plugin once the process that started it is gone:
// a host killed with SIGKILL cannot tell go-plugin to stop its plugins,
// and the orphan is re-parented (to init or a subreaper), so a parent
// process id that changes means the host died (COMP-330). A plugin whose
// parent is already init has no host to watch.
func watchHost(interval time.Duration, exit func()) {
	host := os.Getppid()
	if host <= 1 {
		return
	}
	for {
		time.Sleep(interval)
		if os.Getppid() != host {
			exit()
			return
		}
	}
}
