package join

// Reportable reports whether a message at sequence id seq on a group's
// topic, which the client failed to receive or decrypt, may be reported
// as missed, given the group's join anchor (ports.Group.JoinAnchor): only
// a message after the anchor. A message below the anchor predates this
// membership, and the one at the anchor is the commit that added this
// installation; the member holds no secrets for either (JOIN-066,
// COMP-254). A group this installation created has anchor 0, so every
// message of it counts.
func Reportable(joinAnchor, seq uint64) bool { return seq > joinAnchor }

// Missed counts the messages of one group a member failed to receive or
// decrypt, leaving out those [Reportable] excludes. The zero value is
// ready; it is not safe for concurrent use.
type Missed struct {
	// Anchor is the group's join anchor.
	Anchor uint64
	// Count is how many reportable messages were missed.
	Count int
	// Excluded is how many failures were not reported because they lie
	// at or below the anchor.
	Excluded int
}

// Add records a failure at seq and reports whether it counts as missed.
func (m *Missed) Add(seq uint64) bool {
	if !Reportable(m.Anchor, seq) {
		m.Excluded++
		return false
	}
	m.Count++
	return true
}
