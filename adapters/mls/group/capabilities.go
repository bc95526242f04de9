package group

import (
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
)

// defaultProposal and defaultExtension report the types every client
// supports without listing them (§7.2).
func defaultProposal(t message.ProposalType) bool   { return t >= 1 && t <= 7 }
func defaultExtension(t message.ExtensionType) bool { return t >= 1 && t <= 5 }

// supports checks that leaf ln can be a member of a group whose context
// extensions are ext (§11.1, §12.1.7): it lists every non-default extension
// type of ext and everything the required_capabilities extension requires.
func supports(ln *message.LeafNode, ext message.Extensions) error {
	c := &ln.Capabilities
	for _, e := range ext {
		if !defaultExtension(e.Type) && !slices.Contains(c.Extensions, e.Type) {
			return invalid("leaf does not support group context extension %d", e.Type)
		}
	}
	data, ok := ext.Find(message.ExtRequiredCapabilities)
	if !ok {
		return nil
	}
	var rc message.RequiredCapabilities
	if err := codec.Unmarshal(data, &rc); err != nil {
		return invalid("required_capabilities: %v", err)
	}
	for _, e := range rc.ExtensionTypes {
		if !defaultExtension(e) && !slices.Contains(c.Extensions, e) {
			return invalid("leaf lacks required extension %d", e)
		}
	}
	for _, p := range rc.ProposalTypes {
		if !defaultProposal(p) && !slices.Contains(c.Proposals, p) {
			return invalid("leaf lacks required proposal %d", p)
		}
	}
	for _, t := range rc.CredentialTypes {
		if !slices.Contains(c.Credentials, t) {
			return invalid("leaf lacks required credential type %d", t)
		}
	}
	return nil
}

// allSupport checks every member of tree against ext.
func allSupport(tree *ratchettree.Tree, ext message.Extensions) error {
	for _, l := range tree.Members() {
		if err := supports(tree.Leaf(l), ext); err != nil {
			return invalid("member %d: %v", l, err)
		}
	}
	return nil
}

// credentialsCompatible checks §7.3: every member supports ln's credential
// type, and ln supports every credential type in use (skip is the leaf ln
// replaces, if any).
func credentialsCompatible(tree *ratchettree.Tree, ln *message.LeafNode, skip int64) error {
	for _, l := range tree.Members() {
		if int64(l) == skip {
			continue
		}
		other := tree.Leaf(l)
		if !slices.Contains(other.Capabilities.Credentials, ln.Credential.Type) {
			return invalid("member %d does not support credential type %d", l, ln.Credential.Type)
		}
		if !slices.Contains(ln.Capabilities.Credentials, other.Credential.Type) {
			return invalid("leaf does not support member %d's credential type %d", l, other.Credential.Type)
		}
	}
	return nil
}
