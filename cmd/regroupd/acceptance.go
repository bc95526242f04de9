package main

import (
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/ports"
)

// publicValidator returns the validator commit acceptance follows groups
// with: the built-in MLS engine's [mls.PublicGroups], which also reads
// stored states back ([ports.PublicStateViewer]), keeping decoded states
// of at most cacheBytes of encoding between calls (COMP-380).
func publicValidator(cacheBytes int) ports.PublicGroups {
	return mls.NewPublicGroups(&mls.PublicOptions{CacheBytes: cacheBytes})
}
