package mls

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/keypackage"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Options configure an [Engine].
type Options struct {
	// SignaturePrivateKey is the installation's Ed25519 key (32-byte seed),
	// used to sign in every group.
	SignaturePrivateKey []byte
	// PastEpochs is how many past epochs keep their keys for late
	// application messages (0 keeps none). A group this installation was
	// removed from keeps none.
	PastEpochs int
	// Clock dates staged Welcomes and is the time the lifetimes of key
	// packages a processed commit adds are checked against; nil uses the
	// system clock.
	Clock ports.Clock
	// LifetimeSkew widens every added key package's lifetime by this much
	// on both sides when processing a commit, as [PublicOptions] does for
	// the delivery service; 0 means DefaultLifetimeSkew (COMP-315).
	LifetimeSkew time.Duration
	// CacheBytes bounds the states the engine keeps decoded between calls,
	// by their stored size: 0 means DefaultCacheBytes, a negative value
	// keeps none. A kept state is used only while the caller's
	// transaction shows exactly the write it came from (see package doc,
	// State).
	CacheBytes int
}

// Engine implements ports.MLS for one installation in suite 0x0003. Its
// methods may be called from several goroutines, each with its own
// transaction.
type Engine struct {
	suite *ciphersuite.Suite
	opts  Options
	cache *stateCache
}

var _ ports.MLS = (*Engine)(nil)

// New returns an engine for the installation whose signature key opts names.
func New(opts Options) (*Engine, error) {
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		return nil, err
	}
	if _, err := s.SignaturePublicKey(opts.SignaturePrivateKey); err != nil {
		return nil, fmt.Errorf("mls engine: %w", err)
	}
	opts.LifetimeSkew = lifetimeSkew(opts.LifetimeSkew)
	return &Engine{suite: s, opts: opts, cache: newStateCache(opts.CacheBytes)}, nil
}

func toExtensions(in []ports.Extension) message.Extensions {
	out := message.Extensions{}
	for _, e := range in {
		out = append(out, message.Extension{Type: message.ExtensionType(e.Type), Data: e.Data})
	}
	return out
}

func fromExtensions(in message.Extensions) []ports.Extension {
	out := make([]ports.Extension, 0, len(in))
	for _, e := range in {
		out = append(out, ports.Extension{Type: uint16(e.Type), Data: e.Data})
	}
	return out
}

// CreateKeyPackage creates a key package with a basic credential whose
// identity is opts.Credential (JOIN-004).
func (e *Engine) CreateKeyPackage(ctx context.Context, opts ports.KeyPackageOptions) (ports.KeyPackageBundle, error) {
	o := &keypackage.Options{
		Credential:    message.Credential{Type: message.CredentialBasic, Identity: opts.Credential},
		SignaturePriv: opts.SignaturePrivateKey,
		Lifetime:      message.Lifetime{NotBefore: unix(opts.NotBefore), NotAfter: unix(opts.NotAfter)},
		Extensions:    toExtensions(opts.Extensions),
	}
	for _, t := range opts.CapabilityExtensions {
		o.CapabilityExtensions = append(o.CapabilityExtensions, message.ExtensionType(t))
	}
	for _, t := range opts.CapabilityProposals {
		o.CapabilityProposals = append(o.CapabilityProposals, message.ProposalType(t))
	}
	b, err := keypackage.New(e.suite, o)
	if err != nil {
		return ports.KeyPackageBundle{}, fmt.Errorf("create key package: %w", err)
	}
	return ports.KeyPackageBundle{KeyPackage: b.Encoded, Ref: b.Ref, InitPrivateKey: b.InitPriv, EncryptionPrivateKey: b.EncryptionPriv}, nil
}

func unix(t time.Time) uint64 {
	if t.IsZero() || t.Unix() < 0 {
		return 0
	}
	return uint64(t.Unix())
}

// decodeKeyPackage accepts a bare KeyPackage or one in an MLSMessage.
func decodeKeyPackage(b []byte) (*message.KeyPackage, error) {
	var kp message.KeyPackage
	if err := codec.Unmarshal(b, &kp); err == nil {
		return &kp, nil
	}
	m, err := framing.Decode(b)
	if err != nil || m.KeyPackage == nil {
		return nil, fmt.Errorf("%w: not a key package", ports.ErrInvalid)
	}
	return m.KeyPackage, nil
}

// ValidateKeyPackage checks kp under RFC 9420 §10.1 (JOIN-007) and, when
// opts.Now is set, its lifetime (JOIN-008).
func (e *Engine) ValidateKeyPackage(ctx context.Context, kp []byte, opts ports.ValidateOptions) (ports.ValidatedKeyPackage, error) {
	k, err := decodeKeyPackage(kp)
	if err != nil {
		return ports.ValidatedKeyPackage{}, err
	}
	if err := keypackage.Validate(e.suite, k, &keypackage.ValidateOptions{Now: opts.Now}); err != nil {
		return ports.ValidatedKeyPackage{}, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
	if k.LeafNode.Credential.Type != message.CredentialBasic {
		return ports.ValidatedKeyPackage{}, fmt.Errorf("%w: credential type %d (JOIN-004)", ports.ErrInvalid, k.LeafNode.Credential.Type)
	}
	ref, err := k.Ref(e.suite)
	if err != nil {
		return ports.ValidatedKeyPackage{}, err
	}
	lt := k.LeafNode.Lifetime
	return ports.ValidatedKeyPackage{
		Ref: ref, CipherSuite: uint16(k.CipherSuite), SignatureKey: k.LeafNode.SignatureKey, InitKey: k.InitKey,
		Credential: k.LeafNode.Credential.Identity, NotBefore: unixTime(lt.NotBefore), NotAfter: unixTime(lt.NotAfter),
		Extensions: fromExtensions(k.Extensions),
	}, nil
}

func unixTime(s uint64) time.Time {
	if s > 1<<62 {
		s = 1 << 62
	}
	return time.Unix(int64(s), 0).UTC()
}

// inboxID reads the inbox of a basic credential holding an MlsCredential.
func inboxID(c *message.Credential) string {
	var mc contentspb.MlsCredential
	if c.Type != message.CredentialBasic || proto.Unmarshal(c.Identity, &mc) != nil {
		return ""
	}
	return mc.GetInboxId()
}

// now returns the time of the engine's clock.
func (e *Engine) now() time.Time {
	if e.opts.Clock != nil {
		return e.opts.Clock.Now()
	}
	return time.Now()
}

func u16s[T ~uint16](in []T) []uint16 { return u16sLike(in, nil) }

// u16sLike is u16s returning like when it holds the same values: the
// members of a group mostly advertise the same capabilities, which their
// descriptions then share.
func u16sLike[T ~uint16](in []T, like []uint16) []uint16 {
	if like != nil && len(like) == len(in) {
		same := true
		for i, v := range in {
			if uint16(v) != like[i] {
				same = false
				break
			}
		}
		if same {
			return like
		}
	}
	out := make([]uint16, len(in))
	for i, v := range in {
		out[i] = uint16(v)
	}
	return out
}

// toMember describes the leaf at l for the port.
func toMember(l uint32, leaf *message.LeafNode) ports.Member {
	if leaf == nil {
		return ports.Member{LeafIndex: l}
	}
	m := describe(leaf)
	m.LeafIndex = l
	return m
}

// describe describes a leaf for the port, without its index.
func describe(leaf *message.LeafNode) ports.Member { return describeLike(leaf, nil) }

// describeLike is describe sharing the capability lists of like (another
// member's description, or nil) where they hold the same values.
func describeLike(leaf *message.LeafNode, like *ports.Capabilities) ports.Member {
	if like == nil {
		like = &ports.Capabilities{}
	}
	var m ports.Member
	c := &leaf.Capabilities
	m.SignatureKey, m.InboxID, m.EncryptionKey = leaf.SignatureKey, inboxID(&leaf.Credential), leaf.EncryptionKey
	m.CredentialType, m.Credential = uint16(leaf.Credential.Type), leaf.Credential.Identity
	m.Capabilities = ports.Capabilities{Versions: u16sLike(c.Versions, like.Versions), CipherSuites: u16sLike(c.CipherSuites, like.CipherSuites),
		Extensions: u16sLike(c.Extensions, like.Extensions), Proposals: u16sLike(c.Proposals, like.Proposals),
		Credentials: u16sLike(c.Credentials, like.Credentials)}
	m.Extensions = fromExtensions(leaf.Extensions)
	return m
}

// leafMemo remembers how leaves were described: a group's leaves outlive
// its epochs (a tree replaces a leaf, never modifies one), so describing
// a large group's members again after a commit costs a lookup per leaf,
// not a credential decoding. Each leaf points at its description in the
// member list that described it last; a view of exactly the leaves of
// that list (the staged and the installed view of a Welcome, a group
// viewed again unchanged) returns that list itself, which views share
// and nobody changes (COMP-570). It holds at most maxMemoLeaves leaves,
// or twice the leaves of the largest group described (its tree before
// and after a commit), and forgets them all when full: a group larger
// than the fixed bound would otherwise be described anew at every view.
type leafMemo struct {
	mu sync.Mutex
	m  map[*message.LeafNode]memberRef
}

// memberRef is a leaf's description: entry i of a member list.
type memberRef struct {
	list *memberList
	i    int
}

// memberList is a member list a view returned; it never changes.
type memberList struct{ members []ports.Member }

const maxMemoLeaves = 1 << 13

var memberMemo = &leafMemo{m: map[*message.LeafNode]memberRef{}}

// membersOf describes the non-blank leaves ls, as leaf reads them. The
// list may be one an earlier view returned: callers read it, never change
// it (COMP-570).
func membersOf(ls []treemath.LeafIndex, leaf func(treemath.LeafIndex) *message.LeafNode) []ports.Member {
	c := memberMemo
	c.mu.Lock()
	if same := c.described(ls, leaf); same != nil {
		c.mu.Unlock()
		return same
	}
	out := make([]ports.Member, len(ls))
	var missing []int
	for i, l := range ls {
		r, ok := c.m[leaf(l)]
		if !ok {
			missing = append(missing, i)
			continue
		}
		m := r.list.members[r.i]
		m.LeafIndex = uint32(l)
		out[i] = m
	}
	c.mu.Unlock()
	var like *ports.Capabilities
	for _, i := range missing {
		lf := leaf(ls[i])
		if lf == nil {
			out[i] = ports.Member{LeafIndex: uint32(ls[i])}
			continue
		}
		out[i] = describeLike(lf, like)
		out[i].LeafIndex = uint32(ls[i])
		like = &out[i].Capabilities
	}
	list := &memberList{members: out}
	c.mu.Lock()
	if len(c.m)+len(missing) > max(maxMemoLeaves, 2*len(ls)) {
		clear(c.m)
	}
	for i, l := range ls { // every leaf now points into out
		if lf := leaf(l); lf != nil {
			c.m[lf] = memberRef{list: list, i: i}
		}
	}
	c.mu.Unlock()
	return out
}

// described returns the member list that describes exactly the leaves ls
// at their indices, or nil. c.mu is held.
func (c *leafMemo) described(ls []treemath.LeafIndex, leaf func(treemath.LeafIndex) *message.LeafNode) []ports.Member {
	var list *memberList
	for i, l := range ls {
		r, ok := c.m[leaf(l)]
		if !ok || r.i != i || (list != nil && r.list != list) || r.list.members[i].LeafIndex != uint32(l) {
			return nil
		}
		list = r.list
	}
	if list == nil || len(list.members) != len(ls) {
		return nil
	}
	return list.members
}

// view describes a group for the port; removal is the record of an
// inactive group.
func view(g *group.Group, removal *ports.Removal) ports.GroupView {
	gc := g.GroupContext()
	v := ports.GroupView{GroupID: gc.GroupID, Epoch: gc.Epoch, EpochAuthenticator: g.EpochAuthenticator(),
		TreeHash: gc.TreeHash, Extensions: fromExtensions(gc.Extensions), OwnLeaf: uint32(g.Leaf()), Active: g.Active(),
		Members: membersOf(g.Members(), g.LeafNode)}
	if !v.Active && removal != nil {
		v.Removal, v.OwnLeaf = removal, removal.Leaf
	}
	return v
}

// processError maps a group error to the port's classes.
func processError(err error) error {
	var ee *group.EpochError
	switch {
	case errors.As(err, &ee):
		rel := ports.EpochOlder
		if ee.MessageEpoch > ee.GroupEpoch {
			rel = ports.EpochFuture
		}
		return fmt.Errorf("%w", &ports.WrongEpochError{Relation: rel, MessageEpoch: ee.MessageEpoch, GroupEpoch: ee.GroupEpoch})
	case errors.Is(err, group.ErrUndecryptable):
		return fmt.Errorf("%w: %v", ports.ErrUndecryptable, err)
	default:
		return fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
}

// messageEpoch returns the epoch a group message names.
func messageEpoch(m *framing.MLSMessage) (uint64, bool) {
	switch {
	case m.Public != nil:
		return m.Public.Content.Epoch, true
	case m.Private != nil:
		return m.Private.Epoch, true
	}
	return 0, false
}

// inactiveError classifies a message for a group this installation was
// removed from: it holds no keys of any epoch, so a message of an epoch
// before the removal is older, of a later one future, and of the
// removal's own epoch undecryptable; each names ErrInactive as its reason.
func inactiveError(g *group.Group, m *framing.MLSMessage) error {
	epoch, ok := messageEpoch(m)
	gc := g.GroupContext()
	switch {
	case !ok:
		return fmt.Errorf("%w: wire format %d is not a group message", ports.ErrInvalid, m.WireFormat)
	case epoch < gc.Epoch:
		return fmt.Errorf("%w: %w", &ports.WrongEpochError{Relation: ports.EpochOlder, MessageEpoch: epoch, GroupEpoch: gc.Epoch}, ports.ErrInactive)
	case epoch > gc.Epoch:
		return fmt.Errorf("%w: %w", &ports.WrongEpochError{Relation: ports.EpochFuture, MessageEpoch: epoch, GroupEpoch: gc.Epoch}, ports.ErrInactive)
	default:
		return fmt.Errorf("%w: no keys of epoch %d: %w", ports.ErrUndecryptable, epoch, ports.ErrInactive)
	}
}
