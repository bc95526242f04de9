package policy

import (
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
)

// ViewerProtocolVersion is the first protocol version whose clients
// enforce the viewer rules and the role policy version (COMP-385 to
// COMP-389). A client of an earlier version ignores components 0x8010
// and 0x8011, so it would accept a viewer's commit that later clients
// refuse; a group that has viewers therefore states at least this
// minimum protocol version (COMP-390).
var ViewerProtocolVersion = metadata.Version{Major: 1, Minor: 7, Patch: 0}

// NeedsViewerFloor reports whether a group state needs
// [ViewerProtocolVersion] as its minimum protocol version: it lists a
// viewer, or states a role policy version other than [LegacyVersion]
// (COMP-390).
func NeedsViewerFloor(d metadata.Dictionary) bool {
	if v, _ := d.Viewers(); len(v) > 0 {
		return true
	}
	v, ok, err := d.PolicyVersion()
	return ok && err == nil && v != LegacyVersion
}

// RaiseFloor returns after with its minimum protocol version raised to
// [ViewerProtocolVersion] when the commit from before to after lists a
// viewer before did not list, or moves the role policy version, leaving
// a group state that needs the floor (NeedsViewerFloor) while its
// minimum protocol version is absent, malformed or lower (CONF-050).
// raised reports whether it changed the component (COMP-390).
func RaiseFloor(before, after metadata.Dictionary) (d metadata.Dictionary, raised bool) {
	if !NeedsViewerFloor(after) || !givesRules(before, after) {
		return after, false
	}
	if v, ok, err := after.MinProtocolVersion(); ok && err == nil && v.Compare(ViewerProtocolVersion) >= 0 {
		return after, false
	}
	return after.Set(metadata.ComponentMinProtocol, []byte(ViewerProtocolVersion.String())), true
}

// givesRules reports whether after lists a viewer before does not, or
// states another role policy version.
func givesRules(before, after metadata.Dictionary) bool {
	was, _ := before.Viewers()
	now, _ := after.Viewers()
	for _, v := range now {
		if !slices.Contains(was, v) {
			return true
		}
	}
	pb, okb, _ := before.PolicyVersion()
	pa, oka, _ := after.PolicyVersion()
	return okb != oka || pb != pa
}
