package mlstest

import (
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
)

// This file reads just enough of RFC 9420's wire format to forge commits
// the way a hostile member would, independently of the engine under test:
// it finds the fields of a PublicMessage commit and of its UpdatePath's
// leaf, changes them in place and signs again with the member's Ed25519
// key, which the suite holds. It assumes what the suite's groups use:
// Ed25519 signatures and basic credentials.

var errShort = errors.New("mlstest: message too short")

// cursor reads TLS-presentation values of RFC 9420 §2.1.
type cursor struct {
	b   []byte
	off int
	err error
}

func (c *cursor) take(n int) (start int) {
	if c.err == nil && (n < 0 || c.off+n > len(c.b)) {
		c.err = errShort
	}
	if c.err != nil {
		return c.off
	}
	start = c.off
	c.off += n
	return start
}

func (c *cursor) u8() byte {
	i := c.take(1)
	if c.err != nil {
		return 0
	}
	return c.b[i]
}

func (c *cursor) u16() uint16 {
	i := c.take(2)
	if c.err != nil {
		return 0
	}
	return binary.BigEndian.Uint16(c.b[i:])
}

// varint reads a variable-length vector length (§2.1.2).
func (c *cursor) varint() int {
	first := c.u8()
	switch first >> 6 {
	case 0:
		return int(first & 0x3f)
	case 1:
		return int(first&0x3f)<<8 | int(c.u8())
	case 2:
		v := int(first & 0x3f)
		for range 3 {
			v = v<<8 | int(c.u8())
		}
		return v
	}
	c.err = fmt.Errorf("mlstest: bad varint prefix %#x", first)
	return 0
}

// vector reads a vector and returns where its content starts and ends.
func (c *cursor) vector() (start, end int) {
	n := c.varint()
	start = c.take(n)
	return start, start + n
}

// putVarint appends n as a vector length.
func putVarint(b []byte, n int) []byte {
	switch {
	case n < 1<<6:
		return append(b, byte(n))
	case n < 1<<14:
		return append(b, byte(n>>8)|0x40, byte(n))
	default:
		return append(b, byte(n>>24)|0x80, byte(n>>16), byte(n>>8), byte(n))
	}
}

func putVector(b, v []byte) []byte { return append(putVarint(b, len(v)), v...) }

// signWithLabel is RFC 9420 §5.1.2's SignWithLabel for Ed25519.
func signWithLabel(seed []byte, label string, content []byte) []byte {
	sc := putVector(nil, []byte("MLS 1.0 "+label))
	sc = putVector(sc, content)
	return ed25519.Sign(ed25519.NewKeyFromSeed(seed), sc)
}

// publicCommit locates the fields of an MLSMessage holding a PublicMessage
// commit.
type publicCommit struct {
	b []byte
	// content is the FramedContent; groupID its group id.
	contentStart, contentEnd int
	groupIDStart, groupIDEnd int
	senderType               byte
	// leafIndex is where a member sender's leaf index sits, or -1.
	leafIndex int
	// sig is the FramedContentAuthData signature's content.
	sigStart, sigEnd int
	// The path leaf: its start, its parent_hash (commit source) and its
	// signature; pathLeaf is -1 without a path.
	pathLeaf                   int
	parentHashStart, parentEnd int
	leafSigStart, leafSigEnd   int
}

// parseCommit finds the fields of msg, a PublicMessage commit.
func parseCommit(msg []byte) (*publicCommit, error) {
	p := &publicCommit{b: append([]byte(nil), msg...), leafIndex: -1, pathLeaf: -1}
	c := &cursor{b: p.b}
	if v, wf := c.u16(), c.u16(); c.err == nil && (v != 1 || wf != 1) {
		return nil, fmt.Errorf("mlstest: version %d wire format %d is not an mls10 PublicMessage", v, wf)
	}
	p.contentStart = c.off
	p.groupIDStart, p.groupIDEnd = c.vector()
	c.take(8) // epoch
	p.senderType = c.u8()
	switch p.senderType {
	case 1, 2:
		p.leafIndex = c.take(4)
	case 3, 4:
	default:
		return nil, fmt.Errorf("mlstest: sender type %d", p.senderType)
	}
	c.vector() // authenticated_data
	if ct := c.u8(); c.err == nil && ct != 3 {
		return nil, fmt.Errorf("mlstest: content type %d is not a commit", ct)
	}
	c.vector() // proposals
	if c.u8() == 1 {
		p.pathLeaf = c.off
		c.vector() // encryption_key
		c.vector() // signature_key
		if ct := c.u16(); ct != 1 {
			return nil, fmt.Errorf("mlstest: credential type %d is not basic", ct)
		}
		c.vector()    // identity
		for range 5 { // capabilities
			c.vector()
		}
		switch c.u8() {
		case 1:
			c.take(16) // lifetime
		case 3:
			p.parentHashStart, p.parentEnd = c.vector()
		}
		c.vector() // extensions
		p.leafSigStart, p.leafSigEnd = c.vector()
		c.vector() // nodes
	}
	p.contentEnd = c.off
	p.sigStart, p.sigEnd = c.vector()
	if c.err != nil {
		return nil, c.err
	}
	return p, nil
}

// resignLeaf signs the path leaf again with seed, as leaf leafIndex of
// the group (§7.2, source commit).
func (p *publicCommit) resignLeaf(seed []byte, leafIndex uint32) {
	tbs := append([]byte(nil), p.b[p.pathLeaf:p.leafSigStart-varintLen(p.leafSigEnd-p.leafSigStart)]...)
	tbs = putVector(tbs, p.b[p.groupIDStart:p.groupIDEnd])
	tbs = binary.BigEndian.AppendUint32(tbs, leafIndex)
	copy(p.b[p.leafSigStart:p.leafSigEnd], signWithLabel(seed, "LeafNodeTBS", tbs))
}

// resign signs the content again with seed under the serialized group
// context of its epoch (§6.1, FramedContentTBS).
func (p *publicCommit) resign(seed, groupContext []byte) {
	tbs := append([]byte(nil), p.b[:p.contentEnd]...)
	tbs = append(tbs, groupContext...)
	copy(p.b[p.sigStart:p.sigEnd], signWithLabel(seed, "FramedContentTBS", tbs))
}

func varintLen(n int) int {
	return len(putVarint(nil, n))
}

// groupContextOf returns the serialized GroupContext of an MLSMessage
// holding a GroupInfo.
func groupContextOf(groupInfo []byte) ([]byte, error) {
	c := &cursor{b: groupInfo}
	if v, wf := c.u16(), c.u16(); c.err == nil && (v != 1 || wf != 4) {
		return nil, fmt.Errorf("mlstest: version %d wire format %d is not an mls10 GroupInfo", v, wf)
	}
	start := c.off
	c.take(4) // version, cipher_suite
	c.vector()
	c.take(8)
	c.vector()
	c.vector()
	c.vector()
	if c.err != nil {
		return nil, c.err
	}
	return groupInfo[start:c.off], nil
}

// groupInfoParts splits an MLSMessage holding a GroupInfo into its group
// context, its extensions vector (with its length prefix), its
// confirmation tag vector and its signer.
func groupInfoParts(groupInfo []byte) (gc, extensions, tag []byte, signer uint32, err error) {
	c := &cursor{b: groupInfo}
	if v, wf := c.u16(), c.u16(); c.err == nil && (v != 1 || wf != 4) {
		return nil, nil, nil, 0, fmt.Errorf("mlstest: version %d wire format %d is not an mls10 GroupInfo", v, wf)
	}
	start := c.off
	c.take(4)
	c.vector()
	c.take(8)
	c.vector()
	c.vector()
	c.vector()
	gcEnd := c.off
	c.vector()
	extEnd := c.off
	c.vector()
	tagEnd := c.off
	at := c.take(4)
	if c.err != nil {
		return nil, nil, nil, 0, c.err
	}
	return groupInfo[start:gcEnd], groupInfo[gcEnd:extEnd], groupInfo[extEnd:tagEnd], binary.BigEndian.Uint32(groupInfo[at:]), nil
}

// signGroupInfo builds an MLSMessage holding a GroupInfo from its parts
// (as groupInfoParts returns them) signed with seed (§12.4.3).
func signGroupInfo(seed, gc, extensions, tag []byte, signer uint32) []byte {
	tbs := append(append(append([]byte(nil), gc...), extensions...), tag...)
	tbs = binary.BigEndian.AppendUint32(tbs, signer)
	out := append([]byte{0, 1, 0, 4}, tbs...)
	return putVector(out, signWithLabel(seed, "GroupInfoTBS", tbs))
}
