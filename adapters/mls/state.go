package mls

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/ports"
)

// blockKey is the nsTree key of block id of the group stored under k.
func blockKey(k string, id uint64) string { return k + "." + strconv.FormatUint(id, 10) }

// load reads a group's state, or an error wrapping ports.ErrGroupNotFound.
// The state is the caller's to change: a cached one is cloned.
func (e *Engine) load(ctx context.Context, tx ports.Tx, groupID []byte) (*group.Group, error) {
	k := key(groupID)
	head, err := tx.Blobs().Get(ctx, nsGroup, k)
	if errors.Is(err, ports.ErrNotFound) {
		return nil, fmt.Errorf("%w: %x", ports.ErrGroupNotFound, groupID)
	}
	if err != nil {
		return nil, err
	}
	g, err := e.decodeState(ctx, tx, k, head)
	if err != nil {
		return nil, err
	}
	g.SetPastEpochs(e.opts.PastEpochs)
	return g, nil
}

// decodeState returns the state whose head (or, for version 2, whole
// state) is head: from the cache when it holds the write head names, else
// read from the blocks the head lists.
func (e *Engine) decodeState(ctx context.Context, tx ports.Tx, k string, head []byte) (*group.Group, error) {
	tag, split := group.SplitTag(head)
	if !split {
		g, err := group.Load(head, nil)
		if err != nil {
			return nil, fmt.Errorf("mls engine: stored state of group %s: %w", k, err)
		}
		return g, nil
	}
	ck := newCacheKey(nsGroup, k, tag)
	if g := e.cache.get(ck); g != nil {
		return g.Clone(), nil
	}
	size := len(head)
	g, err := group.LoadSplit(head, func(id uint64) ([]byte, error) {
		b, err := tx.Blobs().Get(ctx, nsTree, blockKey(k, id))
		size += len(b)
		return b, err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("mls engine: stored state of group %s: %w", k, err)
	}
	e.cache.put(ck, g.Clone(), size)
	return g, nil
}

// save writes a group's state: its head, and the blocks of tree nodes
// that changed since it was loaded (all of them for a state not loaded
// from the store, dropping any blocks an earlier state of the group id
// left). It returns the bytes written. g must not change afterwards: the
// engine may keep it.
func (e *Engine) save(ctx context.Context, tx ports.Tx, g *group.Group) (int, error) {
	tag := make([]byte, group.TagSize)
	if _, err := rand.Read(tag); err != nil {
		return 0, err
	}
	sp, err := g.MarshalSplit(tag)
	if err != nil {
		return 0, err
	}
	return e.store(ctx, tx, g, sp, tag)
}

// store writes the parts sp of g's state, written under tag; when
// sp.Full it first drops the blocks an earlier state of the group id left.
func (e *Engine) store(ctx context.Context, tx ports.Tx, g *group.Group, sp *group.Split, tag []byte) (int, error) {
	return e.storeShared(ctx, tx, g.Clone(), sp, tag)
}

// storeShared is store for a state nobody changes any more (one the cache
// holds, or the caller's last use of it): the cache keeps g as it is.
func (e *Engine) storeShared(ctx context.Context, tx ports.Tx, g *group.Group, sp *group.Split, tag []byte) (int, error) {
	k := key(g.GroupContext().GroupID)
	blobs := tx.Blobs()
	if sp.Full {
		held, err := blobs.Keys(ctx, nsTree, k+".")
		if err != nil {
			return 0, err
		}
		for _, h := range held {
			id, err := strconv.ParseUint(strings.TrimPrefix(h, k+"."), 10, 64)
			if _, kept := sp.Blocks[id]; err != nil || !kept {
				if err := blobs.Delete(ctx, nsTree, h); err != nil {
					return 0, err
				}
			}
		}
	}
	written := len(sp.Head)
	for id, b := range sp.Blocks {
		if err := blobs.Put(ctx, nsTree, blockKey(k, id), b); err != nil {
			return 0, err
		}
		written += len(b)
	}
	for _, id := range sp.Drop {
		if err := blobs.Delete(ctx, nsTree, blockKey(k, id)); err != nil {
			return 0, err
		}
	}
	if err := blobs.Put(ctx, nsGroup, k, sp.Head); err != nil {
		return 0, err
	}
	e.cache.put(newCacheKey(nsGroup, k, tag), g, sp.Size)
	return written, nil
}
