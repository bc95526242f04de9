package message_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

func sampleLeaf() *message.LeafNode {
	return &message.LeafNode{
		EncryptionKey: []byte("enc"), SignatureKey: []byte("sig"),
		Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte("id"), Certificates: [][]byte{[]byte("c")}},
		Capabilities: message.Capabilities{Versions: []message.ProtocolVersion{message.MLS10}, CipherSuites: []ciphersuite.ID{3},
			Extensions: []message.ExtensionType{6}, Proposals: []message.ProposalType{8}, Credentials: []message.CredentialType{1}},
		Source: message.SourceCommit, Lifetime: message.Lifetime{NotBefore: 1, NotAfter: 2}, ParentHash: []byte("ph"),
		Extensions: message.Extensions{{Type: 5, Data: []byte("x")}}, Signature: []byte("s"),
	}
}

// TestLeafNodeEqualSeesEveryField: changing any field of a LeafNode, found
// by reflection so that a field added later is covered too, makes Equal
// false. Stored past epochs keep only the leaves Equal calls different
// (package group), so a field it ignored would restore a stale leaf.
func TestLeafNodeEqualSeesEveryField(t *testing.T) {
	if !sampleLeaf().Equal(sampleLeaf()) {
		t.Fatal("equal leaves compare different")
	}
	// Mutation k changes the k-th scalar or slice field, on a fresh leaf.
	for k := 0; ; k++ {
		leaf := sampleLeaf()
		n := 0
		var mutate func(path string, v reflect.Value) bool
		mutate = func(path string, v reflect.Value) bool {
			switch v.Kind() {
			case reflect.Struct:
				for i := range v.NumField() {
					if mutate(path+"."+v.Type().Field(i).Name, v.Field(i)) {
						return true
					}
				}
				return false
			case reflect.Slice:
				if v.Type().Elem().Kind() == reflect.Struct {
					for i := range v.Len() {
						if mutate(path, v.Index(i)) {
							return true
						}
					}
					return false
				}
			}
			if n++; n-1 != k {
				return false
			}
			switch v.Kind() {
			case reflect.Slice:
				if v.Type().Elem().Kind() == reflect.Slice {
					v.Index(0).Set(reflect.ValueOf([]byte("other")))
				} else {
					v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
				}
			case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				v.SetUint(v.Uint() + 1)
			default:
				t.Fatalf("%s: field kind %v not covered by this test", path, v.Kind())
			}
			if leaf.Equal(sampleLeaf()) || sampleLeaf().Equal(leaf) {
				t.Errorf("changing %s leaves the leaves equal", path)
			}
			return true
		}
		if !mutate("LeafNode", reflect.ValueOf(leaf).Elem()) {
			if k < 10 {
				t.Fatalf("only %d fields visited", k)
			}
			return
		}
	}
}

// TestLeafNodeEqualMeansSameEncoding: nil and empty slices are equal, as
// their encodings are.
func TestLeafNodeEqualMeansSameEncoding(t *testing.T) {
	a, b := sampleLeaf(), sampleLeaf()
	a.Extensions, b.Extensions = nil, message.Extensions{}
	a.Credential.Certificates, b.Credential.Certificates = nil, [][]byte{}
	ea, _ := codec.Marshal(a)
	eb, _ := codec.Marshal(b)
	if !a.Equal(b) || !bytes.Equal(ea, eb) {
		t.Fatalf("nil and empty slices: Equal %v, same encoding %v", a.Equal(b), bytes.Equal(ea, eb))
	}
	var none *message.LeafNode
	if none.Equal(a) || a.Equal(none) || !none.Equal(nil) {
		t.Fatal("nil leaves")
	}
}
