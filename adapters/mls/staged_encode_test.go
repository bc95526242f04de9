package mls

import (
	"maps"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// encodeStaged writes a staged Welcome's blob from its decoded parts: in
// parts when it has a tag, else as the untagged version that earlier
// engines wrote. The engine writes blobs with encodeStagedPlan; the tests
// use this encoder to make blobs of either version and to check that
// decodeStaged reads back what was written.
func encodeStaged(s stagedBlob) ([]byte, error) {
	size := len(s.state) + len(s.head) + 64
	for _, b := range s.blocks {
		size += len(b) + 16 // the block id and its length
	}
	w := codec.NewWriter(size)
	writeStagedHeader(w, s)
	if s.tag == nil {
		w.Opaque(s.state)
		return w.Bytes()
	}
	w.Opaque(s.head)
	w.Vector(func(w *codec.Writer) {
		for _, id := range slices.Sorted(maps.Keys(s.blocks)) {
			w.Uint64(id)
			w.Opaque(s.blocks[id])
		}
	})
	return w.Bytes()
}
