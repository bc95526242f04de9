package group

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"math/bits"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// splitVersion tags the head of a state stored in parts
// ([Group.MarshalSplit]).
const splitVersion = 3

// TagSize is the size of the tag that names one write of a split state.
const TagSize = 16

// blockLevels is how many tree levels a block spans: tier t holds levels
// blockLevels·t to blockLevels·t + blockLevels − 1, so a tier-0 block is
// a subtree of 16 leaves (31 nodes) and a block of a higher tier holds up
// to 31 parent nodes.
const blockLevels = 5

// Split is a group state stored in parts (state version 3): a head with
// everything but the ratchet tree's nodes, and the nodes in blocks. A
// commit changes the nodes of one path, so storing it rewrites the head
// and the few blocks that path crosses.
type Split struct {
	// Head is the state without the tree's nodes; it names each block
	// with the tag of the write that stored it.
	Head []byte
	// Blocks are the blocks to store, by block id: every block when Full,
	// otherwise the blocks that changed since the state was last loaded
	// or split.
	Blocks map[uint64][]byte
	// Drop are the blocks that no longer hold any node; a Full split names
	// none, and the stored blocks it does not write must be dropped.
	Drop []uint64
	// Full reports a split of a state that was not loaded or split before.
	Full bool
	// Size is the size of the whole stored state: the head and every
	// block, written now or before.
	Size int
}

// manifest maps each stored block to the tag of the write that stored it
// and its size.
type manifest map[uint64]storedBlock

type storedBlock struct {
	tag  []byte
	size uint32
}

func (m manifest) marshal(w *codec.Writer) {
	w.Vector(func(w *codec.Writer) {
		for _, id := range slices.Sorted(maps.Keys(m)) {
			w.Uint64(id)
			w.Raw(m[id].tag)
			w.Uint32(m[id].size)
		}
	})
}

func readManifest(r *codec.Reader) manifest {
	m := manifest{}
	var last uint64
	r.VectorEach(func(r *codec.Reader) {
		id := r.Uint64()
		if len(m) > 0 && id <= last {
			r.Failf("block %d out of order", id)
		}
		m[id], last = storedBlock{tag: r.Raw(TagSize), size: r.Uint32()}, id
	})
	return m
}

// size returns the bytes of the blocks m lists.
func (m manifest) size() int {
	n := 0
	for _, b := range m {
		n += int(b.size)
	}
	return n
}

// encodeManifest is the stamp a stored tree carries: its width and manifest.
func encodeManifest(width int, m manifest) []byte {
	w := codec.NewWriter(8 + len(m)*(12+TagSize))
	w.Uint32(uint32(width))
	m.marshal(w)
	b, _ := w.Bytes()
	return b
}

// stampManifest reads a stored tree's stamp; an empty manifest for a tree
// never stored.
func stampManifest(stamp []byte) manifest {
	if stamp == nil {
		return manifest{}
	}
	r := codec.NewReader(stamp)
	r.Uint32()
	return readManifest(r)
}

// treeVersion names the stored form of a tree: what a commit staged on it
// is applied to. A tree never stored has none.
func treeVersion(t *ratchettree.Tree) []byte {
	if t.Stamp() == nil {
		return nil
	}
	h := sha256.Sum256(t.Stamp())
	return h[:TagSize]
}

// ancestorAt returns the index of x's ancestor at level in an unbounded
// tree (x itself when x is at that level).
func ancestorAt(x uint64, level uint) uint64 {
	return x>>(level+1)<<(level+1) | (1<<level - 1)
}

// blockOf returns the id of the block holding node x: the index of its
// ancestor at the top level of its tier.
func blockOf(x treemath.NodeIndex) uint64 {
	top := x.Level()/blockLevels*blockLevels + blockLevels - 1
	return ancestorAt(uint64(x), top)
}

// blockTop returns the top level of the block id, false when id names no
// block.
func blockTop(id uint64) (uint, bool) {
	top := uint(bits.TrailingZeros64(^id)) // a node's level is its number of trailing ones
	return top, top < 63 && top%blockLevels == blockLevels-1
}

// blockNodes returns the nodes of block id that lie below width.
func blockNodes(id uint64, width int) []treemath.NodeIndex {
	top, ok := blockTop(id)
	if !ok {
		return nil
	}
	var out []treemath.NodeIndex
	span := uint64(1)<<top - 1 // the block's subtree spans id−span … id+span
	for lv := top + 1 - blockLevels; lv <= top; lv++ {
		for x := id - span + (uint64(1)<<lv - 1); x <= id+span && x < uint64(width); x += uint64(1) << (lv + 1) {
			out = append(out, treemath.NodeIndex(x))
		}
	}
	slices.Sort(out)
	return out
}

// MarshalSplit returns the group state in parts, the head tagged with tag
// (TagSize bytes the caller draws for this write), and records in the
// state that it was stored so: the next split holds only the blocks
// changed since. The encoding holds secrets: store it as such.
func (g *Group) MarshalSplit(tag []byte) (*Split, error) {
	if len(tag) != TagSize {
		return nil, fmt.Errorf("%w: tag of %d bytes", ErrInvalid, len(tag))
	}
	out := &Split{Blocks: map[uint64][]byte{}}
	dirty, m, full := g.dirtyBlocks()
	out.Full = full
	scratch := codec.NewWriter(8192) // one buffer for every block, each copied out at its size
	for _, id := range dirty {
		b, empty, err := g.encodeBlock(scratch, id, tag)
		if err != nil {
			return nil, err
		}
		if empty {
			if _, held := m[id]; held {
				out.Drop = append(out.Drop, id)
			}
			delete(m, id)
			continue
		}
		out.Blocks[id], m[id] = b, storedBlock{tag: slices.Clone(tag), size: uint32(len(b))}
	}
	var err error
	if out.Head, err = g.splitHead(tag, m); err != nil {
		return nil, err
	}
	out.Size = len(out.Head) + m.size()
	g.tree.MarkStored(encodeManifest(g.tree.Width(), m))
	return out, nil
}

// dirtyBlocks returns the ids of the blocks a split must write, ascending,
// with the manifest of the stored state they change (empty when full: the
// state was never stored, and every block that holds a node is dirty).
func (g *Group) dirtyBlocks() (ids []uint64, m manifest, full bool) {
	changed, all := g.tree.Changes()
	m = stampManifest(g.tree.Stamp())
	dirty := map[uint64]bool{}
	if all {
		full, m = true, manifest{}
		for x := 0; x < g.tree.Width(); x++ {
			if g.tree.Node(treemath.NodeIndex(x)) != nil {
				dirty[blockOf(treemath.NodeIndex(x))] = true
			}
		}
	}
	for _, x := range changed {
		dirty[blockOf(x)] = true
	}
	return slices.Sorted(maps.Keys(dirty)), m, full
}

// splitHead encodes the head of a split written under tag whose blocks m
// lists.
func (g *Group) splitHead(tag []byte, m manifest) ([]byte, error) {
	w := codec.NewWriter(4096)
	w.Uint8(splitVersion)
	w.Raw(tag)
	w.Uint16(uint16(g.suite.ID()))
	g.gc.MarshalMLS(w)
	g.marshalRest(w)
	w.Uint32(uint32(g.tree.Width()))
	m.marshal(w)
	return w.Bytes()
}

// encodeBlock encodes the non-blank nodes of block id; empty when it has
// none.
// w is scratch space; b is a copy the caller keeps.
func (g *Group) encodeBlock(w *codec.Writer, id uint64, tag []byte) (b []byte, empty bool, err error) {
	w.Reset()
	n := g.appendBlock(w, id, tag)
	b, err = w.Bytes()
	return slices.Clone(b), n == 0, err
}

// appendBlock appends the encoding of block id, written under tag, to w
// and returns how many nodes it holds.
func (g *Group) appendBlock(w *codec.Writer, id uint64, tag []byte) (nodes int) {
	w.Raw(tag)
	w.Uint64(id)
	w.Vector(func(w *codec.Writer) {
		for _, x := range blockNodes(id, g.tree.Width()) {
			if node := g.tree.Node(x); node != nil {
				w.Uint32(uint32(x))
				node.MarshalMLS(w)
				nodes++
			}
		}
	})
	return nodes
}

// SplitTag returns the tag of a head written by [Group.MarshalSplit];
// false when b is not such a head.
func SplitTag(head []byte) ([]byte, bool) {
	if len(head) < 1+TagSize || head[0] != splitVersion {
		return nil, false
	}
	return head[1 : 1+TagSize], true
}

// LoadSplit restores a group written by [Group.MarshalSplit] from its head
// and the blocks block returns by id; every block must carry the tag the
// head names it with, so that parts of different writes never mix. psks
// supplies external PSKs for later commits.
func LoadSplit(head []byte, block func(id uint64) ([]byte, error), psks PSKStore) (*Group, error) {
	r := codec.NewReader(head)
	if v := r.Uint8(); v != splitVersion {
		return nil, fmt.Errorf("%w: split group state version %d", ErrInvalid, v)
	}
	r.Raw(TagSize)
	g, err := newLoaded(r, psks)
	if err != nil {
		return nil, err
	}
	rest := g.loadRest(r)
	width := int(r.Uint32())
	m := readManifest(r)
	if err := r.Finish(); err != nil {
		return nil, fmt.Errorf("load group: %w", err)
	}
	if width < 1 || width > 1<<31-1 || (width+1)&width != 0 {
		return nil, fmt.Errorf("%w: load group: tree width %d", ErrInvalid, width)
	}
	nodes := map[treemath.NodeIndex]*message.Node{}
	for _, id := range slices.Sorted(maps.Keys(m)) {
		b, err := block(id)
		if err != nil {
			return nil, fmt.Errorf("load group: block %d: %w", id, err)
		}
		if err := decodeBlock(b, id, m[id].tag, width, nodes); err != nil {
			return nil, err
		}
	}
	if g.tree, err = ratchettree.Import(g.suite, denseTree(nodes)); err != nil {
		return nil, fmt.Errorf("%w: load group: %w", ErrInvalid, err)
	}
	if g.tree.Width() != width {
		return nil, fmt.Errorf("%w: load group: tree of width %d stored as %d", ErrInvalid, g.tree.Width(), width)
	}
	if err := g.finishLoad(rest); err != nil {
		return nil, err
	}
	g.tree.MarkStored(encodeManifest(width, m))
	return g, nil
}

// denseTree lays nodes out in ratchet_tree extension form, up to the last
// non-blank node.
func denseTree(nodes map[treemath.NodeIndex]*message.Node) message.RatchetTree {
	end := 0
	for x := range nodes {
		end = max(end, int(x)+1)
	}
	out := make(message.RatchetTree, end)
	for x, n := range nodes {
		out[x] = n
	}
	return out
}

// decodeBlock reads block id, which must carry tag, into nodes.
func decodeBlock(b []byte, id uint64, tag []byte, width int, nodes map[treemath.NodeIndex]*message.Node) error {
	r := codec.NewReader(b)
	if got := r.Raw(TagSize); r.Err() == nil && !bytes.Equal(got, tag) {
		return fmt.Errorf("%w: load group: block %d was stored by another write", ErrInvalid, id)
	}
	if got := r.Uint64(); r.Err() == nil && got != id {
		return fmt.Errorf("%w: load group: block %d holds block %d", ErrInvalid, id, got)
	}
	r.VectorEach(func(r *codec.Reader) {
		x := treemath.NodeIndex(r.Uint32())
		n := new(message.Node)
		r.Value(n)
		switch {
		case r.Err() != nil:
		case uint64(x) >= uint64(width) || blockOf(x) != id:
			r.Failf("node %d outside block %d", x, id)
		case nodes[x] != nil:
			r.Failf("node %d twice", x)
		default:
			nodes[x] = n
		}
	})
	if err := r.Finish(); err != nil {
		return fmt.Errorf("%w: load group: block %d: %w", ErrInvalid, id, err)
	}
	return nil
}
