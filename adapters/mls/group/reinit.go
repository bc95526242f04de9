package group

import (
	"bytes"
	"crypto/rand"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// resumption names the predecessor epoch whose resumption_psk a
// reinitialized or branched group injects (§8.6).
type resumption struct {
	usage   message.ResumptionPSKUsage
	groupID []byte
	epoch   uint64
	secret  []byte
}

// resumes reports whether id is the resumption PSK of this group's
// predecessor that its first commit may inject: only at epoch 0, in the
// commit that creates the successor.
func (g *Group) resumes(id *message.PreSharedKeyID) bool {
	r := g.predecessor
	return r != nil && g.gc.Epoch == 0 && id.Usage == r.usage && bytes.Equal(id.GroupID, r.groupID) && id.Epoch == r.epoch
}

// checkReInit applies §12.1.5 and §12.2 to a commit's ReInit: it stands
// alone, and its version is not below the group's.
func checkReInit(g *Group, props []cached) error {
	for _, p := range props {
		if p.proposal.Type != message.ProposalReInit {
			continue
		}
		if len(props) != 1 {
			return invalid("ReInit proposal together with %d other proposals", len(props)-1)
		}
		if p.proposal.ReInit == nil {
			return invalid("ReInit proposal without its body")
		}
		if p.proposal.ReInit.Version < g.gc.Version {
			return invalid("ReInit to version %d below the group's %d", p.proposal.ReInit.Version, g.gc.Version)
		}
	}
	return nil
}

// ReInit returns the ReInit of the commit that started this epoch, nil
// when there was none. A group with a ReInit has ended (§11.2): it sends
// nothing more, and [Group.Reinitialize] creates its successor.
func (g *Group) ReInit() *message.ReInit { return g.reinit }

// ended refuses to send in a group whose last commit carried a ReInit.
func (g *Group) ended() error {
	if g.reinit != nil {
		return fmt.Errorf("%w: the group ended with a ReInit at epoch %d", ErrReInitialized, g.gc.Epoch)
	}
	return nil
}

// SuccessorOptions describe the first epoch of a group created from this
// one, by [Group.Reinitialize] or [Group.Branch].
type SuccessorOptions struct {
	// GroupID and Extensions of a branch; a reinitialized group takes
	// those of the ReInit.
	GroupID    []byte
	Extensions message.Extensions
	// Leaf, EncryptionPriv and SignaturePriv are the creator's, in the
	// successor's cipher suite.
	Leaf           *message.LeafNode
	EncryptionPriv []byte
	SignaturePriv  []byte
	// KeyPackages are the other members' (in the successor's suite).
	KeyPackages []*message.KeyPackage
	// Path forces an UpdatePath in the first commit.
	Path bool
	// TreeInWelcome puts the ratchet_tree extension in the Welcome.
	TreeInWelcome bool
	// PSKs supplies external PSKs for the successor's later commits.
	PSKs PSKStore
}

// Reinitialize creates the successor of a group that ended with a ReInit
// (§11.2): a group with the ReInit's group id, cipher suite and
// extensions whose first commit adds the key packages and injects this
// epoch's resumption PSK with usage reinit. It returns the successor at
// epoch 1 and the Welcome for the others.
func (g *Group) Reinitialize(opts *SuccessorOptions) (*Group, *message.Welcome, error) {
	if g.reinit == nil {
		return nil, nil, invalid("the group has no ReInit to carry out")
	}
	s, err := ciphersuite.Lookup(g.reinit.CipherSuite)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reinit: %w", ErrUnsupported, err)
	}
	return g.successor(s, g.reinit.GroupID, g.reinit.Extensions, message.UsageReInit, opts)
}

// Branch creates a subgroup of this group (§11.3) with the same suite: a
// group with opts.GroupID and opts.Extensions whose first commit adds the
// key packages and injects this epoch's resumption PSK with usage
// branch. It returns the subgroup at epoch 1 and the Welcome.
func (g *Group) Branch(opts *SuccessorOptions) (*Group, *message.Welcome, error) {
	if opts == nil {
		return nil, nil, invalid("options are required")
	}
	if err := g.ended(); err != nil {
		return nil, nil, err
	}
	return g.successor(g.suite, opts.GroupID, opts.Extensions, message.UsageBranch, opts)
}

func (g *Group) successor(s *ciphersuite.Suite, groupID []byte, exts message.Extensions, usage message.ResumptionPSKUsage,
	opts *SuccessorOptions) (*Group, *message.Welcome, error) {
	if g.Public() {
		return nil, nil, errPublic
	}
	if opts == nil {
		return nil, nil, invalid("options are required")
	}
	secret, ok := g.resume[g.gc.Epoch]
	if !ok {
		return nil, nil, fmt.Errorf("%w: resumption psk of epoch %d", ErrUnknownPSK, g.gc.Epoch)
	}
	next, err := Create(s, &CreateOptions{GroupID: groupID, Leaf: opts.Leaf, EncryptionPriv: opts.EncryptionPriv,
		SignaturePriv: opts.SignaturePriv, Extensions: exts, PSKs: opts.PSKs})
	if err != nil {
		return nil, nil, err
	}
	next.predecessor = &resumption{usage: usage, groupID: g.gc.GroupID, epoch: g.gc.Epoch, secret: secret}
	var props []*message.Proposal
	for _, kp := range opts.KeyPackages {
		props = append(props, &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *kp}})
	}
	id := message.PreSharedKeyID{Type: message.PSKResumption, Usage: usage, GroupID: g.gc.GroupID, Epoch: g.gc.Epoch,
		Nonce: make([]byte, s.HashSize())}
	if err := randomNonce(id.Nonce); err != nil {
		return nil, nil, err
	}
	props = append(props, &message.Proposal{Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: id}})
	p, err := next.Commit(&CommitOptions{Proposals: props, Path: opts.Path, TreeInWelcome: opts.TreeInWelcome})
	if err != nil {
		return nil, nil, err
	}
	if err := next.MergePending(p); err != nil {
		return nil, nil, err
	}
	next.predecessor = nil
	return next, p.Welcome, nil
}

// checkSuccessor verifies, for a Welcome whose GroupSecrets name a
// resumption PSK of usage reinit or branch, that the new group is the
// successor that PSK claims (§11.2, §11.3): it is at epoch 1 and either
// matches the predecessor's ReInit (group id, version, suite,
// extensions) or, for a branch, keeps its version and suite and has only
// members whose credentials some member of the predecessor presents.
func checkSuccessor(joined *Group, pred *Group, r *resumption) error {
	gc := &joined.gc
	if gc.Epoch != 1 {
		return invalid("resumed group at epoch %d, want 1", gc.Epoch)
	}
	switch r.usage {
	case message.UsageReInit:
		ri := pred.reinit
		if ri == nil {
			return invalid("reinit psk of a group that did not end with a ReInit")
		}
		if !bytes.Equal(gc.GroupID, ri.GroupID) || gc.Version != ri.Version || gc.CipherSuite != ri.CipherSuite || !sameExtensions(gc.Extensions, ri.Extensions) {
			return invalid("reinitialized group differs from its ReInit")
		}
	case message.UsageBranch:
		if gc.Version != pred.gc.Version || gc.CipherSuite != pred.gc.CipherSuite {
			return invalid("branch of version %d suite %#04x from version %d suite %#04x", gc.Version, uint16(gc.CipherSuite), pred.gc.Version, uint16(pred.gc.CipherSuite))
		}
		for _, l := range joined.tree.Members() {
			if !hasCredential(pred, &joined.tree.Leaf(l).Credential) {
				return invalid("branch member at leaf %d is no member of the predecessor", l)
			}
		}
	}
	return nil
}

func sameExtensions(a, b message.Extensions) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

// hasCredential reports whether a member of g presents the same
// credential, byte for byte: regroup's notion of leaves whose identifiers
// match, for a branch (COMP-303).
func hasCredential(g *Group, c *message.Credential) bool {
	want, err := codec.Marshal(c)
	if err != nil {
		return false
	}
	for _, l := range g.tree.Members() {
		if got, err := codec.Marshal(&g.tree.Leaf(l).Credential); err == nil && bytes.Equal(got, want) {
			return true
		}
	}
	return false
}

func randomNonce(b []byte) error {
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("psk nonce: %w", err)
	}
	return nil
}

// predecessorFor returns the resumption a Welcome's GroupSecrets name with
// usage reinit or branch, resolved against pred; nil when they name none.
func predecessorFor(psks []message.PreSharedKeyID, pred *Group) (*resumption, error) {
	for _, id := range psks {
		if id.Type != message.PSKResumption || id.Usage == message.UsageApplication {
			continue
		}
		if id.Usage != message.UsageReInit && id.Usage != message.UsageBranch {
			return nil, invalid("resumption psk usage %d", id.Usage)
		}
		if pred == nil || !bytes.Equal(pred.gc.GroupID, id.GroupID) {
			return nil, fmt.Errorf("%w: resumption psk (usage %d) of group %x without that group", ErrUnknownPSK, id.Usage, id.GroupID)
		}
		secret, ok := pred.resume[id.Epoch]
		if !ok {
			return nil, fmt.Errorf("%w: resumption psk of epoch %d of the predecessor", ErrUnknownPSK, id.Epoch)
		}
		if id.Usage == message.UsageReInit && id.Epoch != pred.gc.Epoch {
			return nil, invalid("reinit psk of epoch %d, the ReInit took effect at %d", id.Epoch, pred.gc.Epoch)
		}
		return &resumption{usage: id.Usage, groupID: id.GroupID, epoch: id.Epoch, secret: secret}, nil
	}
	return nil, nil
}
