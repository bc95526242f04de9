// Command hostile is a deliberately misbehaving regroup algorithm plugin
// used to test what the plugin host checks. It speaks the plugin protocol
// directly, without the sdk, so it can send what the sdk never would.
//
// What it does is chosen by its own file name: a binary named
// "regroup-plugin-<mode>" behaves as <mode> says (see [modes]). Each mode
// serves one wrapper under [WrapperID] (public keys of 32 bytes) and one
// pointee AEAD under [AEADID] (32-byte keys, 12-byte nonces) unless the mode
// declares something else.
//
// When REGROUP_HOSTILE_DIR names a directory, every process writes
// "<mode>.<pid>.start" there when it starts and "<mode>.<pid>.hang" when it
// enters a hang, so a test can tell which processes ran and whether they are
// gone.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/plugins/internal/protocol"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// WrapperID and AEADID are the identifiers the hostile plugin serves.
const (
	WrapperID = int32(ports.LocalWrapperIDBase + 0x7e00)
	AEADID    = int32(0x7e01)
)

// server misbehaves as its mode says; methods it does not override answer
// like an honest plugin of the declared sizes would, in shape only (no
// cryptography).
type server struct {
	pluginpb.UnimplementedAlgorithmsServer
	mode string
	dir  string
}

func main() {
	mode := strings.TrimPrefix(filepath.Base(os.Args[0]), "regroup-plugin-")
	s := &server{mode: mode, dir: os.Getenv("REGROUP_HOSTILE_DIR")}
	s.mark("start")
	if mode == "hang-start" {
		s.hang()
	}
	if mode == "hang-restart" && s.dir != "" {
		// The first process serves; every later one hangs before the
		// handshake.
		marker := filepath.Join(s.dir, mode+".served")
		if _, err := os.Stat(marker); err == nil {
			s.hang()
		}
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  protocol.Handshake,
		VersionedPlugins: protocol.PluginSets(s),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			// Far above the protocol's limit: the host must refuse
			// what it did not ask for.
			return grpc.NewServer(append(opts, grpc.MaxSendMsgSize(1<<30), grpc.MaxRecvMsgSize(1<<30))...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Error, JSONFormat: true}),
	})
}

func (s *server) mark(what string) {
	if s.dir == "" {
		return
	}
	name := fmt.Sprintf("%s.%d.%s", s.mode, os.Getpid(), what)
	if err := os.WriteFile(filepath.Join(s.dir, name), nil, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// hang blocks for ever, ignoring every context.
func (s *server) hang() {
	s.mark("hang")
	for {
		time.Sleep(time.Hour)
	}
}

// describeModes are descriptions a plugin must not get away with.
var describeModes = map[string]func() *pluginpb.DescribeResponse{
	"desc-pub-0":     func() *pluginpb.DescribeResponse { return desc(WrapperID, 0, AEADID, 32, 12) },
	"desc-pub-2p31":  func() *pluginpb.DescribeResponse { return desc(WrapperID, 1<<31, AEADID, 32, 12) },
	"desc-pub-max":   func() *pluginpb.DescribeResponse { return desc(WrapperID, 1<<32-1, AEADID, 32, 12) },
	"desc-key-0":     func() *pluginpb.DescribeResponse { return desc(WrapperID, 32, AEADID, 0, 12) },
	"desc-key-2p31":  func() *pluginpb.DescribeResponse { return desc(WrapperID, 32, AEADID, 1<<31, 12) },
	"desc-nonce-0":   func() *pluginpb.DescribeResponse { return desc(WrapperID, 32, AEADID, 32, 0) },
	"desc-nonce-max": func() *pluginpb.DescribeResponse { return desc(WrapperID, 32, AEADID, 32, 1<<32-1) },
	"desc-wid-0":     func() *pluginpb.DescribeResponse { return desc(0, 32, AEADID, 32, 12) },
	"desc-wid-neg":   func() *pluginpb.DescribeResponse { return desc(-5, 32, AEADID, 32, 12) },
	"desc-wid-3":     func() *pluginpb.DescribeResponse { return desc(int32(ports.WrapperSymmetricKey), 32, AEADID, 32, 12) },
	"desc-aid-0":     func() *pluginpb.DescribeResponse { return desc(WrapperID, 32, 0, 32, 12) },
	"desc-aid-neg":   func() *pluginpb.DescribeResponse { return desc(WrapperID, 32, -5, 32, 12) },
	"desc-wid-twice": func() *pluginpb.DescribeResponse {
		d := desc(WrapperID, 32, AEADID, 32, 12)
		d.Wrappers = append(d.Wrappers, d.Wrappers[0])
		return d
	},
	"desc-aid-twice": func() *pluginpb.DescribeResponse {
		d := desc(WrapperID, 32, AEADID, 32, 12)
		d.Aeads = append(d.Aeads, d.Aeads[0])
		return d
	},
	"desc-many":      func() *pluginpb.DescribeResponse { return many(100_000) },
	"desc-just-over": func() *pluginpb.DescribeResponse { return many(65) },
	"desc-empty":     func() *pluginpb.DescribeResponse { return &pluginpb.DescribeResponse{} },
	"desc-nil-entry": func() *pluginpb.DescribeResponse {
		d := desc(WrapperID, 32, AEADID, 32, 12)
		d.Wrappers = append(d.Wrappers, nil)
		return d
	},
	"desc-other-than": func() *pluginpb.DescribeResponse { return desc(WrapperID+1, 32, AEADID+1, 32, 12) },
}

func desc(wid int32, pub uint32, aid int32, key, nonce uint32) *pluginpb.DescribeResponse {
	return &pluginpb.DescribeResponse{
		Wrappers: []*pluginpb.WrapperDescription{{Id: wid, PublicKeySize: pub}},
		Aeads:    []*pluginpb.AeadDescription{{Id: aid, KeySize: key, NonceSize: nonce}},
	}
}

func many(n int) *pluginpb.DescribeResponse {
	d := &pluginpb.DescribeResponse{}
	for i := range n {
		d.Wrappers = append(d.Wrappers, &pluginpb.WrapperDescription{Id: WrapperID + int32(i), PublicKeySize: 32})
	}
	return d
}

func (s *server) Describe(context.Context, *pluginpb.DescribeRequest) (*pluginpb.DescribeResponse, error) {
	if f := describeModes[s.mode]; f != nil {
		return f(), nil
	}
	return desc(WrapperID, 32, AEADID, 32, 12), nil
}

// fault answers every call but Describe the way modes that break every
// reply do; nil means "answer as the method would".
func (s *server) fault() error {
	switch s.mode {
	case "exhausted":
		return status.Error(codes.ResourceExhausted, "the plugin says it is exhausted")
	case "chatty":
		msg := "line one\nline two \x1b[31mred\x1b[0m \r" + strings.Repeat("blah ", 8<<10/5)
		return protocol.ToStatus(fmt.Errorf("%s: %w", msg, ports.ErrCorrupt))
	case "verbose":
		return protocol.ToStatus(fmt.Errorf("%s: %w", strings.Repeat("x", 1<<20), ports.ErrCorrupt))
	}
	return nil
}

func (s *server) WrapperGenerateKey(context.Context, *pluginpb.WrapperGenerateKeyRequest) (*pluginpb.WrapperGenerateKeyResponse, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	pub := make([]byte, 32)
	if s.mode == "liar" {
		pub = make([]byte, 1000)
	}
	return &pluginpb.WrapperGenerateKeyResponse{PublicKey: pub, PrivateKey: make([]byte, 32)}, nil
}

func (s *server) WrapperCheckPublicKey(context.Context, *pluginpb.WrapperCheckPublicKeyRequest) (*pluginpb.WrapperCheckPublicKeyResponse, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	// Every mode accepts any key: the host must check the size itself.
	return &pluginpb.WrapperCheckPublicKeyResponse{}, nil
}

func (s *server) WrapperSeal(_ context.Context, r *pluginpb.WrapperSealRequest) (*pluginpb.WrapperSealResponse, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	pts := r.GetPlaintexts()
	if len(pts) > 0 {
		switch string(pts[0]) {
		case "crash":
			os.Exit(3)
		case "hang":
			s.hang()
		}
	}
	out := make([][]byte, len(pts))
	switch s.mode {
	case "liar":
		for i := range out {
			out[i] = []byte{1}
		}
	case "flood":
		out = make([][]byte, 3_000_000)
	case "huge":
		out[0] = make([]byte, 65<<20)
	default:
		for i, pt := range pts {
			out[i] = append(append([]byte(nil), pt...), make([]byte, 16)...)
		}
	}
	return &pluginpb.WrapperSealResponse{Sealed: out}, nil
}

func (s *server) WrapperOpen(_ context.Context, r *pluginpb.WrapperOpenRequest) (*pluginpb.WrapperOpenResponse, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	out := make([][]byte, len(r.GetSealed()))
	for i, c := range r.GetSealed() {
		n := max(len(c)-16, 0)
		if s.mode == "liar" {
			n = len(c) + 100
		}
		out[i] = make([]byte, n)
	}
	return &pluginpb.WrapperOpenResponse{Plaintexts: out}, nil
}

func (s *server) AeadSeal(_ context.Context, r *pluginpb.AeadSealRequest) (*pluginpb.AeadSealResponse, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	if s.mode == "liar" {
		return &pluginpb.AeadSealResponse{Ciphertext: []byte{1}}, nil
	}
	return &pluginpb.AeadSealResponse{Ciphertext: append(append([]byte(nil), r.GetPlaintext()...), make([]byte, 16)...)}, nil
}

func (s *server) AeadOpen(_ context.Context, r *pluginpb.AeadOpenRequest) (*pluginpb.AeadOpenResponse, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	if s.mode == "liar" {
		return &pluginpb.AeadOpenResponse{Plaintext: []byte("fives")}, nil
	}
	return &pluginpb.AeadOpenResponse{Plaintext: make([]byte, max(len(r.GetCiphertext())-16, 0))}, nil
}
