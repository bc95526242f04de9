package join

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// candidate is a Welcome that passed every check and is ready to install.
type candidate struct {
	held    ports.HeldWelcome
	o       opened
	anchor  uint64
	staged  ports.StagedWelcome
	dict    metadata.Dictionary
	ct      ports.ConversationType
	dmID    string
	root    []byte
	minVer  string
	adder   ports.Member
	replace bool
	// verified reports that section 8 accepted the membership, the
	// adder's inbox included (JOIN-052).
	verified bool
}

// heldGroup is the group state a Welcome is compared against.
type heldGroup struct {
	g    *ports.Group     // nil when the client holds no such group
	view *ports.GroupView // nil when the engine holds no state for it
	// repair reports that ReceiverOptions.ReplaceForked lets the Welcome
	// replace the active state of a forked conversation (COMP-205).
	repair bool
}

// attempt runs one Welcome through the pipeline and records its outcome.
// authed reports a Welcome whose join validation authenticated it: the
// engine verified the GroupInfo signature while staging it and section 8
// verified the signer's membership (JOIN-052), whatever its outcome after
// that (COMP-290). It returns an error only when the outcome itself could
// not be recorded, or for a local failure (JOIN-085).
func (r *Receiver) attempt(ctx context.Context, h ports.HeldWelcome) (authed bool, err error) {
	r.hosted.reset()
	c, err := r.evaluate(ctx, h)
	authed = c != nil && c.verified
	if err == nil {
		if c.ct == ports.ConversationOneshot {
			err = r.oneshot(ctx, c)
		} else {
			err = r.install(ctx, c)
		}
		if err == nil {
			return authed, nil
		}
	}
	var gid []byte
	if c != nil {
		gid = c.staged.Group.GroupID
	}
	var rej *Rejection
	var hd *Hold
	if r.hosted.name != "" && plaintextRefusal(err) {
		err = r.recheckHosted(ctx, h, err)
	}
	switch {
	case errors.As(err, &rej):
		return authed, r.rejectHeld(ctx, h, gid, rej)
	case errors.As(err, &hd):
	default:
		hd = &Hold{Kind: HoldRetry, Rule: "JOIN-085", Err: err}
	}
	return authed, r.keepHeld(ctx, h, gid, senderClass(c, hd), hd)
}

// evaluate runs the checks of sections 4 to 9 in order and returns the
// candidate to install, or the Rejection or Hold that decides the
// Welcome. A returned candidate may be non-nil with an error once the
// Welcome was staged, so the caller knows its group.
func (r *Receiver) evaluate(ctx context.Context, h ports.HeldWelcome) (*candidate, error) {
	env, err := decodeHeld(h)
	if err != nil {
		return nil, err
	}
	o, err := r.open(ctx, env)
	if err != nil {
		return nil, err
	}
	if v, ok := mlsVersion(o.welcome); ok && v != mls10 {
		// JOIN-087: a later protocol version; an upgrade can read it.
		return nil, &Hold{Kind: HoldUnreadable, Rule: "JOIN-087", Err: fmt.Errorf("the welcome is of mls version %d", v), plaintext: true}
	}
	if !isWelcomeMessage(o.welcome) { // JOIN-026
		return nil, unreadable("JOIN-026", "the wrapped payload is not an MLSMessage of wire_format mls_welcome")
	}
	var meta contentspb.WelcomeMetadata
	if o.hasMeta {
		if err := proto.Unmarshal(o.meta, &meta); err != nil {
			return nil, unreadable("JOIN-036", "welcome_metadata does not decode: %v", err)
		}
	}
	if len(o.kp.InitPrivateKey) == 0 || len(o.kp.EncryptionPrivateKey) == 0 {
		return nil, hold(HoldUnreadable, "JOIN-084", "the private keys of key package %x are not held", short(o.kp.Ref))
	}
	c := &candidate{held: h, o: o, anchor: meta.GetMessageCursor()}
	var hg heldGroup
	err = r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		st, err := r.o.MLS.StageWelcome(ctx, tx, o.welcome, o.kp)
		if err != nil {
			return err
		}
		c.staged = st
		if st.HasPSKs {
			return nil
		}
		hg, err = r.heldGroup(ctx, tx, st)
		return err
	})
	switch {
	case errors.Is(err, ports.ErrUnsupported):
		return nil, hold(HoldUnreadable, "JOIN-087", "%v", err)
	case errors.Is(err, ports.ErrUndecryptable):
		return nil, unreadable("JOIN-048", "group secrets do not decrypt: %v", err)
	case errors.Is(err, ports.ErrInvalid):
		return nil, unreadable("JOIN-048", "mls welcome: %v", err)
	case err != nil:
		return nil, local(err)
	case c.staged.HasPSKs:
		return nil, reject("JOIN-027", "GroupSecrets.psks is not empty")
	}
	if err := c.read(); err != nil {
		return c, err
	}
	if err := checkAnchor(c, o.hasMeta); err != nil {
		return c, err
	}
	if err := checkIdentity(c, hg); err != nil {
		return c, err
	}
	if c.ct != ports.ConversationOneshot {
		if err := r.awaitAnchorAccepted(ctx, c); err != nil {
			return c, err
		}
		if c.replace, err = r.awaitReplacement(ctx, c, hg); err != nil {
			return c, err
		}
	}
	if c.adder, err = adderOf(c.staged); err != nil {
		return c, err
	}
	if err := r.checkMembership(ctx, c); err != nil {
		return c, err
	}
	c.verified = true
	if err := r.checkGroup(c); err != nil {
		return c, err
	}
	return c, nil
}

// read decodes the group's metadata: its conversation type first, which
// the anchor check needs (JOIN-060 for a group without one).
func (c *candidate) read() error {
	d, err := metadata.FromExtensions(c.staged.Group.Extensions)
	if err != nil {
		return reject("JOIN-060", "group metadata: %v", err)
	}
	c.dict = d
	if c.ct, err = d.ConversationType(); err != nil {
		return reject("JOIN-060", "%v", err)
	}
	if c.ct == ports.ConversationDM {
		one, two, err := d.DMMembers()
		if err != nil {
			return reject("JOIN-060", "a DM without DM_MEMBERS: %v", err)
		}
		c.dmID = metadata.DMID(one, two)
	}
	return nil
}

// mls10 is RFC 9420's ProtocolVersion mls10 (§6).
const mls10 = 1

// mlsVersion returns the ProtocolVersion that opens an MLSMessage (§6),
// ok false when there is none: fewer than two bytes, or the reserved
// value 0, neither of which a later version can make readable.
func mlsVersion(b []byte) (uint16, bool) {
	if len(b) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(b)
	return v, v != 0
}

// isWelcomeMessage reports an MLSMessage (RFC 9420 §6) of version mls10
// and wire_format mls_welcome (0x0003): its first four bytes.
func isWelcomeMessage(b []byte) bool {
	return len(b) > 4 && b[0] == 0 && b[1] == 1 && b[2] == 0 && b[3] == 3
}

// checkAnchor applies section 6.
func checkAnchor(c *candidate, present bool) error {
	if !present {
		if c.ct == ports.ConversationOneshot {
			return nil // JOIN-036 exempts one-shot groups
		}
		return reject("JOIN-036", "the welcome carries no WelcomeMetadata")
	}
	if c.anchor >= c.o.seq {
		return reject("JOIN-037", "message_cursor %d is not less than the welcome's sequence id %d", c.anchor, c.o.seq)
	}
	if c.anchor == 0 && c.staged.Group.Epoch != 0 {
		return reject("JOIN-038", "message_cursor 0 for a group at epoch %d", c.staged.Group.Epoch)
	}
	return nil
}

// checkIdentity applies JOIN-089: a held group keeps its conversation
// type and dm id. It reads only stored state, never the topic.
func checkIdentity(c *candidate, hg heldGroup) error {
	if hg.g == nil {
		return nil
	}
	if hg.g.ConversationType != c.ct {
		return reject("JOIN-089", "conversation type %d, the held group's is %d", c.ct, hg.g.ConversationType)
	}
	if c.ct == ports.ConversationDM && hg.g.DMID != c.dmID {
		return reject("JOIN-089", "dm id %q, the held group's is %q", c.dmID, hg.g.DMID)
	}
	return nil
}

// heldGroup reads the state a staged Welcome is compared against, and
// whether the opt-in repair lets it replace an active forked state.
func (r *Receiver) heldGroup(ctx context.Context, tx ports.Tx, st ports.StagedWelcome) (heldGroup, error) {
	var hg heldGroup
	gid := st.Group.GroupID
	g, err := tx.Groups().Get(ctx, gid)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return hg, nil
	case err != nil:
		return hg, err
	}
	hg.g = &g
	v, err := r.o.MLS.Group(ctx, tx, gid)
	switch {
	case errors.Is(err, ports.ErrGroupNotFound):
		return hg, nil
	case err != nil:
		return hg, err
	}
	hg.view = &v
	if r.o.ReplaceForked != nil && v.Active {
		if adder, err := adderOf(st); err == nil {
			if hg.repair, err = r.o.ReplaceForked(ctx, tx, g, v, adder); err != nil {
				return hg, err
			}
		}
	}
	return hg, nil
}

// decideReplace applies section 7 to the held group and returns whether
// installing replaces held state. It reads nothing but its arguments, so
// the install transaction runs it again on what it reads.
func decideReplace(hg heldGroup, epoch uint64, treeHash []byte, anchor uint64) (bool, error) {
	if hg.g == nil {
		return false, nil
	}
	if hg.g.RestoredPlaceholder || hg.view == nil {
		return true, nil // JOIN-080: a first join over a placeholder
	}
	cursor, v := hg.g.Cursor, hg.view
	if hg.repair && epoch >= v.Epoch {
		// COMP-205: a permitted readder's Welcome repairs a forked member
		// that asked for it, whose diverged state read on past its readd.
		return true, nil
	}
	if anchor < cursor {
		return false, reject("JOIN-043", "message_cursor %d is below the stored cursor %d", anchor, cursor)
	}
	if v.Active {
		if v.Epoch < epoch && cursor < anchor {
			return false, hold(HoldRemoval, "JOIN-092", "the group is active at epoch %d and cursor %d; the welcome is at epoch %d, anchor %d", v.Epoch, cursor, epoch, anchor)
		}
		return false, reject("JOIN-042", "the group's state is active (epoch %d, cursor %d)", v.Epoch, cursor)
	}
	if epoch < v.Epoch {
		return false, reject("JOIN-042", "epoch %d is before the held state's %d", epoch, v.Epoch)
	}
	if anchor == cursor {
		rm := v.Removal
		if rm == nil || rm.Epoch != epoch || !bytes.Equal(rm.TreeHash, treeHash) {
			return false, reject("JOIN-042", "at the stored cursor %d the welcome must carry the removal's epoch and tree hash", cursor)
		}
	}
	return true, nil
}

// awaitReplacement decides section 7; when the group waits for its
// removal (JOIN-092) it catches the topic up once and decides again, and
// past the 3-day deadline rejects a Welcome whose anchor the topic never
// reached.
func (r *Receiver) awaitReplacement(ctx context.Context, c *candidate, hg heldGroup) (bool, error) {
	g := &c.staged.Group
	replace, err := decideReplace(hg, g.Epoch, g.TreeHash, c.anchor)
	var hd *Hold
	if !errors.As(err, &hd) || hd.Kind != HoldRemoval {
		return replace, err
	}
	if r.o.CatchUp != nil {
		if cerr := r.o.CatchUp(ctx, g.GroupID); cerr != nil {
			return false, local(fmt.Errorf("catch up group %x: %w", short(g.GroupID), cerr))
		}
		if hg, err = r.readGroup(ctx, c.staged); err != nil {
			return false, local(err)
		}
		if replace, err = decideReplace(hg, g.Epoch, g.TreeHash, c.anchor); !errors.As(err, &hd) || hd.Kind != HoldRemoval {
			return replace, err
		}
	}
	if r.o.Clock.Now().Before(c.held.ServerTimestamp.Add(3 * 24 * time.Hour)) {
		return false, err
	}
	newest, herr := r.o.Transport.HighestSequenceID(ctx, groupTopic(g.GroupID))
	if herr != nil {
		return false, local(herr)
	}
	if newest < c.anchor && hg.g.Cursor >= newest {
		return false, reject("JOIN-092", "3 days after the welcome the group's topic ends at %d, below message_cursor %d", newest, c.anchor)
	}
	return false, err
}

func (r *Receiver) readGroup(ctx context.Context, st ports.StagedWelcome) (hg heldGroup, err error) {
	err = r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		hg, err = r.heldGroup(ctx, tx, st)
		return err
	})
	return hg, err
}

// groupTopic returns a group's message topic: 0x00 || group id.
func groupTopic(gid []byte) []byte { return append([]byte{byte(ports.TopicGroupMessages)}, gid...) }

// adderOf returns the leaf at GroupInfo.signer in the Welcome's ratchet
// tree (JOIN-025).
func adderOf(st ports.StagedWelcome) (ports.Member, error) {
	for _, m := range st.Group.Members {
		if m.LeafIndex == st.Signer.LeafIndex {
			if !bytes.Equal(m.SignatureKey, st.Signer.SignatureKey) {
				return ports.Member{}, reject("JOIN-025", "the GroupInfo signer is not the tree's leaf %d", m.LeafIndex)
			}
			return m, nil
		}
	}
	return ports.Member{}, reject("JOIN-025", "the GroupInfo signer %d is not a leaf of the ratchet tree", st.Signer.LeafIndex)
}
