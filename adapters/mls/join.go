package mls

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
	"github.com/regroup-mls/regroup/adapters/mls/welcome"
	"github.com/regroup-mls/regroup/ports"
)

var _ ports.MLSWelcomes = (*Engine)(nil)

func treeLeaf(i uint32) treemath.LeafIndex { return treemath.LeafIndex(i) }

// welcomeVersion tags a staged Welcome's blob: a tag drawn for the write
// (group.TagSize bytes), the staging time, the GroupInfo signer and the
// joined group's state in parts (group state version 3: a head tagged with
// the same tag, and the blocks of tree nodes), which InstallWelcome stores
// as the group's state as they are. Version welcomeVersionUntagged holds
// the staging time, the signer and the state in one blob (group state
// version 2); a blob that starts with the group state's own version byte
// (2) is a staged Welcome of an engine that kept only that state.
const (
	welcomeVersion         = 0x82
	welcomeVersionUntagged = 0x81
)

// handle binds a staged Welcome to its group, epoch and bytes: the hex
// group id, the epoch and a hash of the Welcome, so that one Welcome
// always stages under one handle and a group's handles share a prefix.
func handle(groupID []byte, epoch uint64, msg []byte) string {
	h := sha256.Sum256(msg)
	return handlePrefix(groupID) + strconv.FormatUint(epoch, 10) + "." + hex.EncodeToString(h[:12])
}

func handlePrefix(groupID []byte) string { return key(groupID) + "." }

// stagedBlob is a decoded staged Welcome.
type stagedBlob struct {
	tag    []byte // nil for a blob of an earlier version
	at     time.Time
	signer uint32
	// state is the one-blob state of an earlier version; head and blocks
	// the state in parts.
	state  []byte
	head   []byte
	blocks map[uint64][]byte
}

// stagedHeaderSize is the size of a staged Welcome's header in parts:
// its version, tag, staging time and signer.
const stagedHeaderSize = 1 + group.TagSize + 8 + 4

// writeStagedHeader writes the header of a staged Welcome's blob: in parts
// when it has a tag, else as the untagged version.
func writeStagedHeader(w *codec.Writer, s stagedBlob) {
	if s.tag == nil {
		w.Uint8(welcomeVersionUntagged)
	} else {
		w.Uint8(welcomeVersion)
		w.Raw(s.tag)
	}
	ns := uint64(0) // unknown
	if !s.at.IsZero() {
		ns = uint64(s.at.UnixNano())
	}
	w.Uint64(ns)
	w.Uint32(s.signer)
}

// encodeStagedPlan writes the blob of a staged Welcome in parts: the
// header of s (tagged) and the parts p, each block encoded once, in place
// in the blob.
func encodeStagedPlan(s stagedBlob, p *group.SplitPlan) ([]byte, error) {
	size := stagedHeaderSize + 4 + len(p.Head) + 4 // 4: the most a length takes
	for _, n := range p.Sizes {
		size += 8 + 4 + n
	}
	w := codec.NewWriter(size)
	writeStagedHeader(w, s)
	w.Opaque(p.Head)
	var err error
	w.Vector(func(w *codec.Writer) {
		for i, id := range p.IDs {
			w.Uint64(id)
			w.Vector(func(w *codec.Writer) {
				if err == nil {
					err = p.AppendBlock(w, i)
				}
			})
		}
	})
	if err != nil {
		return nil, err
	}
	return w.Bytes()
}

func decodeStaged(b []byte) (stagedBlob, error) {
	if len(b) > 0 && b[0] == 2 { // a version-2 group state, staged before the wrapper
		return stagedBlob{signer: ports.NoLeaf, state: b}, nil
	}
	r := codec.NewReader(b)
	s, err := readStagedHeader(r)
	if err != nil {
		return stagedBlob{}, err
	}
	if s.tag == nil {
		s.state = r.Opaque()
		return s, r.Finish()
	}
	// The parts alias b, which is the caller's: a blob read for this call.
	s.head, s.blocks = r.OpaqueView(), map[uint64][]byte{}
	var last uint64
	r.VectorEach(func(r *codec.Reader) {
		id := r.Uint64()
		if len(s.blocks) > 0 && id <= last {
			r.Failf("block %d out of order", id)
		}
		s.blocks[id], last = r.OpaqueView(), id
	})
	return s, r.Finish()
}

// readStagedHeader reads what writeStagedHeader writes.
func readStagedHeader(r *codec.Reader) (stagedBlob, error) {
	s := stagedBlob{}
	switch v := r.Uint8(); v {
	case welcomeVersion:
		s.tag = r.Raw(group.TagSize)
	case welcomeVersionUntagged:
	default:
		return stagedBlob{}, fmt.Errorf("staged welcome version %d", v)
	}
	if ns := r.Uint64(); ns != 0 {
		s.at = time.Unix(0, int64(ns)).UTC()
	}
	s.signer = r.Uint32()
	return s, r.Err()
}

// split returns the staged state in parts as the group's state to store,
// nil for a blob of an earlier version.
func (s stagedBlob) split() *group.Split {
	if s.tag == nil {
		return nil
	}
	size := len(s.head)
	for _, b := range s.blocks {
		size += len(b)
	}
	return &group.Split{Head: s.head, Blocks: s.blocks, Full: true, Size: size}
}

// decodeState decodes the staged group's state, in parts or in one blob.
func (s stagedBlob) decodeState() (*group.Group, error) {
	if s.tag == nil {
		return group.Load(s.state, nil)
	}
	return group.LoadSplit(s.head, func(id uint64) ([]byte, error) {
		b, ok := s.blocks[id]
		if !ok {
			return nil, fmt.Errorf("no block %d", id)
		}
		return b, nil
	}, nil)
}

// loadStaged reads a staged Welcome, or an error wrapping ports.ErrNotFound.
// The state is the caller's to change: a cached one is cloned.
func (e *Engine) loadStaged(ctx context.Context, tx ports.Tx, h string) (*group.Group, stagedBlob, error) {
	g, s, shared, err := e.readStaged(ctx, tx, h)
	if err == nil && shared {
		g = g.Clone()
	}
	return g, s, err
}

// readStaged reads a staged Welcome, or an error wrapping
// ports.ErrNotFound. When shared is true the state, and s's head and
// blocks, are the cache's: the caller may read them and hand them to the
// cache again, never change them. Every state the cache holds already
// keeps this engine's PastEpochs.
func (e *Engine) readStaged(ctx context.Context, tx ports.Tx, h string) (g *group.Group, s stagedBlob, shared bool, err error) {
	if g, s, shared, err = e.readStagedCached(ctx, tx, h); err != nil || shared {
		return g, s, shared, err
	}
	b, err := tx.Blobs().Get(ctx, nsWelcome, h)
	if errors.Is(err, ports.ErrNotFound) {
		return nil, stagedBlob{}, false, fmt.Errorf("staged welcome %s: %w", h, ports.ErrNotFound)
	}
	if err != nil {
		return nil, stagedBlob{}, false, err
	}
	if s, err = decodeStaged(b); err != nil {
		return nil, stagedBlob{}, false, fmt.Errorf("mls engine: staged welcome %s: %w", h, err)
	}
	ck := newCacheKey(nsWelcome, h, s.tag)
	if s.tag != nil {
		if c := e.cache.get(ck); c != nil {
			return c, s, true, nil
		}
	}
	if g, err = s.decodeState(); err != nil {
		return nil, stagedBlob{}, false, fmt.Errorf("mls engine: staged welcome %s: %w", h, err)
	}
	g.SetPastEpochs(e.opts.PastEpochs)
	if s.tag != nil {
		// The parts are views of b, which the cache holds with them.
		e.cache.putSplit(ck, g.Clone(), s.split(), len(b))
	}
	return g, s, false, nil
}

// readStagedCached reads no more than the header of a staged Welcome when
// the store reads the start of a blob alone ([ports.BlobPrefixReader]) and
// the cache holds the state, and the parts it is stored as, under the tag
// the header names; shared is false, and the caller reads the whole blob,
// otherwise. A tag names one write: the parts the cache holds under it
// are the bytes the blob holds after the header (COMP-573).
func (e *Engine) readStagedCached(ctx context.Context, tx ports.Tx, h string) (g *group.Group, s stagedBlob, shared bool, err error) {
	pr, ok := tx.Blobs().(ports.BlobPrefixReader)
	if !ok || e.cache == nil {
		return nil, stagedBlob{}, false, nil
	}
	b, err := pr.GetPrefix(ctx, nsWelcome, h, stagedHeaderSize)
	if errors.Is(err, ports.ErrNotFound) {
		return nil, stagedBlob{}, false, fmt.Errorf("staged welcome %s: %w", h, ports.ErrNotFound)
	}
	if err != nil {
		return nil, stagedBlob{}, false, err
	}
	if len(b) < stagedHeaderSize || b[0] != welcomeVersion {
		return nil, stagedBlob{}, false, nil // an earlier version, or not a staged Welcome
	}
	if s, err = readStagedHeader(codec.NewReader(b)); err != nil {
		return nil, stagedBlob{}, false, nil // the whole blob's read reports it
	}
	g, sp := e.cache.getSplit(newCacheKey(nsWelcome, h, s.tag))
	if g == nil || sp == nil {
		return nil, stagedBlob{}, false, nil
	}
	s.head, s.blocks = sp.Head, sp.Blocks
	return g, s, true, nil
}

func stagedView(h string, g *group.Group, s stagedBlob) ports.StagedWelcome {
	out := ports.StagedWelcome{Group: view(g, nil), Handle: h, StagedAt: s.at, Signer: ports.Member{LeafIndex: s.signer}}
	if s.signer != ports.NoLeaf {
		out.Signer = toMember(s.signer, g.LeafNode(treeLeaf(s.signer)))
	}
	return out
}

// unsupported checks that the key package advertises the Welcome's MLS
// version and cipher suite, and that this engine speaks them (JOIN-087).
func (e *Engine) unsupported(m *framing.MLSMessage, kp *message.KeyPackage) error {
	caps := &kp.LeafNode.Capabilities
	if m.Version != message.MLS10 || !slices.Contains(caps.Versions, m.Version) {
		return fmt.Errorf("%w: welcome of mls version %d", ports.ErrUnsupported, m.Version)
	}
	s := m.Welcome.CipherSuite
	if s != e.suite.ID() || s != kp.CipherSuite || !slices.Contains(caps.CipherSuites, s) {
		return fmt.Errorf("%w: welcome of cipher suite %#04x", ports.ErrUnsupported, uint16(s))
	}
	return nil
}

// StageWelcome decrypts and verifies a Welcome with the key package's
// private keys without installing it. A Welcome whose GroupSecrets name
// PSKs is reported with HasPSKs and not staged (JOIN-027).
func (e *Engine) StageWelcome(ctx context.Context, tx ports.Tx, msg []byte, kp ports.KeyPackageRecord) (ports.StagedWelcome, error) {
	// The Welcome is read within this call and none of it is kept (the
	// group's state comes from the GroupInfo's own plaintext): a view of
	// msg saves a copy of the encrypted GroupInfo, the size of the tree.
	m, err := framing.DecodeView(msg)
	if err != nil || m.Welcome == nil {
		return ports.StagedWelcome{}, fmt.Errorf("%w: not a Welcome", ports.ErrInvalid)
	}
	k, err := decodeKeyPackage(kp.KeyPackage)
	if err != nil {
		return ports.StagedWelcome{}, err
	}
	if err := e.unsupported(m, k); err != nil {
		return ports.StagedWelcome{}, err
	}
	gs, err := welcome.OpenSecrets(e.suite, m.Welcome, k, kp.InitPrivateKey)
	if errors.Is(err, welcome.ErrDecrypt) {
		return ports.StagedWelcome{}, fmt.Errorf("%w: %v", ports.ErrUndecryptable, err)
	}
	if err != nil {
		return ports.StagedWelcome{}, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
	if len(gs.PSKs) > 0 {
		return ports.StagedWelcome{HasPSKs: true}, nil
	}
	g, err := group.Join(e.suite, m.Welcome, &group.JoinOptions{KeyPackage: k, InitPriv: kp.InitPrivateKey,
		EncryptionPriv: kp.EncryptionPrivateKey, SignaturePriv: e.opts.SignaturePrivateKey, Secrets: gs})
	if errors.Is(err, group.ErrUnsupported) {
		return ports.StagedWelcome{}, fmt.Errorf("%w: %v", ports.ErrUnsupported, err)
	}
	if err != nil {
		return ports.StagedWelcome{}, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
	g.SetPastEpochs(e.opts.PastEpochs)
	h := handle(g.GroupContext().GroupID, g.Epoch(), msg)
	if held, s, err := e.loadStaged(ctx, tx, h); err == nil {
		return stagedView(h, held, s), nil // staged before: one Welcome, one handle
	} else if !errors.Is(err, ports.ErrNotFound) {
		return ports.StagedWelcome{}, err
	}
	s := stagedBlob{tag: make([]byte, group.TagSize), at: e.now().UTC(), signer: g.WelcomeSigner()}
	if _, err := rand.Read(s.tag); err != nil {
		return ports.StagedWelcome{}, err
	}
	// The blocks are written into the blob in place, and the parts kept
	// are views of it.
	plan, err := g.PlanSplit(s.tag)
	if err != nil {
		return ports.StagedWelcome{}, err
	}
	b, err := encodeStagedPlan(s, plan)
	if err != nil {
		return ports.StagedWelcome{}, err
	}
	parts, err := decodeStaged(b)
	if err != nil {
		return ports.StagedWelcome{}, fmt.Errorf("mls engine: staged welcome %s: %w", h, err)
	}
	s.head, s.blocks = parts.head, parts.blocks
	if err := tx.Blobs().Put(ctx, nsWelcome, h, b); err != nil {
		return ports.StagedWelcome{}, err
	}
	// g and b do not change from here on: the cache may keep them as they
	// are, b for InstallWelcome to store without reading it back.
	e.cache.putSplit(newCacheKey(nsWelcome, h, s.tag), g, s.split(), len(b))
	return stagedView(h, g, s), nil
}

// InstallWelcome installs a staged Welcome into a group the engine holds
// no state for.
func (e *Engine) InstallWelcome(ctx context.Context, tx ports.Tx, h string) (ports.GroupView, error) {
	return e.InstallWelcomeWith(ctx, tx, h, ports.InstallOptions{})
}

// InstallWelcomeWith installs a staged Welcome; with opts.Replace over
// held state whose epoch is not greater than the Welcome's. It deletes
// every staged Welcome of the group.
func (e *Engine) InstallWelcomeWith(ctx context.Context, tx ports.Tx, h string, opts ports.InstallOptions) (ports.GroupView, error) {
	// g is only read and stored as it is: the cache's own copy will do.
	g, s, _, err := e.readStaged(ctx, tx, h)
	if err != nil {
		return ports.GroupView{}, err
	}
	gid := g.GroupContext().GroupID
	switch held, err := e.load(ctx, tx, gid); {
	case errors.Is(err, ports.ErrGroupNotFound):
	case err != nil:
		return ports.GroupView{}, err
	case !opts.Replace:
		return ports.GroupView{}, fmt.Errorf("install welcome: group %x is held at epoch %d: %w", gid, held.Epoch(), ports.ErrAlreadyExists)
	case held.Epoch() > g.Epoch():
		return ports.GroupView{}, fmt.Errorf("install welcome: group %x is held at epoch %d, after the welcome's %d: %w", gid, held.Epoch(), g.Epoch(), ports.ErrAlreadyExists)
	}
	if err := deleteAll(ctx, tx, gid, nsStaged, nsPending, nsExternal, nsStagedExternal, nsRemoval); err != nil {
		return ports.GroupView{}, err
	}
	if s.tag == nil {
		_, err = e.save(ctx, tx, g)
	} else { // the staged parts are the group's state, as they are
		_, err = e.storeShared(ctx, tx, g, s.split(), s.tag)
	}
	if err != nil {
		return ports.GroupView{}, err
	}
	siblings, err := e.handles(ctx, tx, gid)
	if err != nil {
		return ports.GroupView{}, err
	}
	for _, s := range append(siblings, h) {
		if err := tx.Blobs().Delete(ctx, nsWelcome, s); err != nil {
			return ports.GroupView{}, err
		}
	}
	if s.tag != nil { // the staged blob is deleted; the group's entry holds g
		e.cache.drop(newCacheKey(nsWelcome, h, s.tag))
	}
	return view(g, nil), nil
}

// handles lists the handles of staged Welcomes of the group, or of every
// group when groupID is nil.
func (e *Engine) handles(ctx context.Context, tx ports.Tx, groupID []byte) ([]string, error) {
	prefix := ""
	if groupID != nil {
		prefix = handlePrefix(groupID)
	}
	out, err := tx.Blobs().Keys(ctx, nsWelcome, prefix)
	if err != nil || groupID == nil {
		return out, err
	}
	// Handles of engines that named them at random carry no group id.
	all, err := tx.Blobs().Keys(ctx, nsWelcome, "")
	if err != nil {
		return nil, err
	}
	for _, h := range all {
		if strings.Contains(h, ".") {
			continue
		}
		if g, _, err := e.loadStaged(ctx, tx, h); err == nil && string(g.GroupContext().GroupID) == string(groupID) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out, nil
}

// StagedWelcome returns what StageWelcome returned for the handle.
func (e *Engine) StagedWelcome(ctx context.Context, tx ports.Tx, h string) (ports.StagedWelcome, error) {
	g, s, err := e.loadStaged(ctx, tx, h)
	if err != nil {
		return ports.StagedWelcome{}, err
	}
	return stagedView(h, g, s), nil
}

// StagedWelcomes lists the staged Welcomes of the group, or of every group
// when groupID is nil.
func (e *Engine) StagedWelcomes(ctx context.Context, tx ports.Tx, groupID []byte) ([]ports.StagedWelcome, error) {
	hs, err := e.handles(ctx, tx, groupID)
	if err != nil {
		return nil, err
	}
	var out []ports.StagedWelcome
	for _, h := range hs {
		st, err := e.StagedWelcome(ctx, tx, h)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// DiscardWelcome deletes a staged Welcome.
func (e *Engine) DiscardWelcome(ctx context.Context, tx ports.Tx, h string) error {
	return tx.Blobs().Delete(ctx, nsWelcome, h)
}

// ExpireWelcomes discards the staged Welcomes staged before stagedBefore
// or at an unknown time.
func (e *Engine) ExpireWelcomes(ctx context.Context, tx ports.Tx, stagedBefore time.Time) (int, error) {
	hs, err := tx.Blobs().Keys(ctx, nsWelcome, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, h := range hs {
		b, err := tx.Blobs().Get(ctx, nsWelcome, h)
		if err != nil {
			return n, err
		}
		s, err := decodeStaged(b)
		if err == nil && !s.at.IsZero() && !s.at.Before(stagedBefore) {
			continue // an undecodable blob is discarded with the expired
		}
		if err := tx.Blobs().Delete(ctx, nsWelcome, h); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
