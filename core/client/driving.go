package client

import "sync"

// driving records the groups whose own commit a caller of this process
// is driving (commitAs): other passes over the group — the workers, a
// sync — leave that commit's intent to the caller, so that a commit the
// caller waits for is not finished behind its back, its intent deleted,
// and the caller left to read it as lost and build the change again
// (COMP-437).
type driving struct {
	mu sync.Mutex
	n  map[string]int
}

// start marks groupID driven until the returned func runs.
func (d *driving) start(groupID []byte) func() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[string(groupID)]++
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.n[string(groupID)]--; d.n[string(groupID)] == 0 {
			delete(d.n, string(groupID))
		}
	}
}

// active reports whether a caller drives groupID's commit now.
func (d *driving) active(groupID []byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[string(groupID)] > 0
}
