// Package tsmls runs ts-mls, an MLS implementation written independently of
// regroup, as a subprocess (driver.mjs under Node) and speaks its JSON-lines
// protocol, so that Go tests can play MLS groups with members of both
// implementations.
//
// Byte strings cross the pipe in hex; every request is answered by exactly
// one response line carrying the same id. A response with an "error" field
// becomes an error wrapping [ErrDriver].
package tsmls

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
)

// Sentinel errors.
var (
	// ErrDriver means ts-mls rejected a request; the message carries its error.
	ErrDriver = errors.New("tsmls: driver error")
	// ErrClosed means the driver process has exited or its pipe broke.
	ErrClosed = errors.New("tsmls: driver closed")
	// ErrNoNode means no node executable is on PATH.
	ErrNoNode = errors.New("tsmls: node not found")
)

// Dir returns the directory holding driver.mjs and package.json.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Install runs `npm ci` in dir when its node_modules directory is absent.
func Install(ctx context.Context, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ts-mls")); err == nil {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%w: npm: %v", ErrNoNode, err)
	}
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tsmls: npm ci: %w\n%s", err, out)
	}
	return nil
}

// Driver is a running driver.mjs. Its methods may be called from several
// goroutines; requests are answered in order.
type Driver struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	mu    sync.Mutex
	next  int
}

// Start launches `node driver.mjs` in dir. stderr, when not nil, receives
// the driver's standard error. Close stops it.
func Start(dir string, stderr io.Writer) (*Driver, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNode, err)
	}
	cmd := exec.Command(node, filepath.Join(dir, "driver.mjs"))
	cmd.Dir = dir
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("tsmls: start driver: %w", err)
	}
	return &Driver{cmd: cmd, stdin: in, out: bufio.NewReaderSize(out, 1<<16)}, nil
}

// Close ends the driver's input and waits for it to exit.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stdin.Close()
	return d.cmd.Wait()
}

// Call sends request op with the given fields (which cannot override
// "id" and "op") and decodes the response into res (which may be nil). ctx bounds the wait: when it ends first the
// driver is killed, since its pipe can no longer be trusted.
func (d *Driver) Call(ctx context.Context, op string, fields map[string]any, res any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	req := map[string]any{}
	for k, v := range fields {
		req[k] = v
	}
	req["id"], req["op"] = d.next, op
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = d.cmd.Process.Kill() })
	defer stop()
	if _, err := d.stdin.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrClosed, op, err)
	}
	resp, err := d.out.ReadBytes('\n')
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s: %w", ErrClosed, op, ctx.Err())
		}
		return fmt.Errorf("%w: %s: %v", ErrClosed, op, err)
	}
	var head struct {
		ID    int    `json:"id"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(resp, &head); err != nil {
		return fmt.Errorf("%w: %s: response %q: %v", ErrClosed, op, resp, err)
	}
	if head.ID != d.next {
		return fmt.Errorf("%w: %s: response id %d, want %d", ErrClosed, op, head.ID, d.next)
	}
	if head.Error != "" {
		return fmt.Errorf("%w: %s: %s", ErrDriver, op, head.Error)
	}
	if res == nil {
		return nil
	}
	return json.Unmarshal(resp, res)
}

// Hex is a byte string carried as hex in JSON.
type Hex []byte

// MarshalJSON writes h as a hex string.
func (h Hex) MarshalJSON() ([]byte, error) { return json.Marshal(hex.EncodeToString(h)) }

// UnmarshalJSON reads a hex string.
func (h *Hex) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := hex.DecodeString(s)
	if err != nil {
		return fmt.Errorf("tsmls: hex field: %w", err)
	}
	*h = v
	return nil
}

// KeyPackage is a ts-mls key package: its MLSMessage encoding and the
// driver's handle for its private keys.
type KeyPackage struct {
	Handle string `json:"handle"`
	KP     Hex    `json:"kp"`
}

// NewKeyPackage makes a key package with a basic credential for identity.
func (d *Driver) NewKeyPackage(ctx context.Context, identity []byte) (*KeyPackage, error) {
	var kp KeyPackage
	err := d.Call(ctx, "keyPackage", map[string]any{"identity": Hex(identity)}, &kp)
	return &kp, err
}

// Member is a ts-mls group state held by the driver.
type Member struct {
	d      *Driver
	Handle string
}

// CreateGroup starts a group with a new member of the given identity.
func (d *Driver) CreateGroup(ctx context.Context, groupID, identity []byte) (*Member, error) {
	var res struct {
		Handle string `json:"handle"`
	}
	err := d.Call(ctx, "createGroup", map[string]any{"groupId": Hex(groupID), "identity": Hex(identity)}, &res)
	return &Member{d: d, Handle: res.Handle}, err
}

// Join processes a Welcome (an MLSMessage) for the key package kp.
func (d *Driver) Join(ctx context.Context, kp *KeyPackage, welcome []byte) (*Member, error) {
	var res struct {
		Handle string `json:"handle"`
	}
	err := d.Call(ctx, "join", map[string]any{"kpHandle": kp.Handle, "welcome": Hex(welcome)}, &res)
	return &Member{d: d, Handle: res.Handle}, err
}

// Commit is a commit created by ts-mls and, when it adds members, its Welcome.
type Commit struct {
	Commit  Hex `json:"commit"`
	Welcome Hex `json:"welcome"`
}

// Commit creates and applies a commit adding the key packages add (each an
// MLSMessage) and removing the leaves remove, as a PublicMessage when
// public is set and as a PrivateMessage otherwise. ts-mls includes an
// UpdatePath whenever the commit needs one (no proposals, or a remove).
func (m *Member) Commit(ctx context.Context, add [][]byte, remove []uint32, public bool) (*Commit, error) {
	return m.CommitWith(ctx, &CommitOptions{Add: add, Remove: remove, Public: public})
}

// CommitOptions is what a ts-mls commit carries, inline.
type CommitOptions struct {
	Add    [][]byte // key packages (MLSMessages) to add
	Remove []uint32 // leaves to remove
	PSKs   [][]byte // ids of external PSKs stored with [Driver.StorePSK]
	Public bool     // PublicMessage, else PrivateMessage
}

// CommitWith creates and applies a commit with the given proposals.
func (m *Member) CommitWith(ctx context.Context, o *CommitOptions) (*Commit, error) {
	hexes := func(in [][]byte) []Hex {
		out := make([]Hex, len(in))
		for i, b := range in {
			out[i] = b
		}
		return out
	}
	remove := o.Remove
	if remove == nil {
		remove = []uint32{}
	}
	var c Commit
	err := m.d.Call(ctx, "commit", map[string]any{"handle": m.Handle, "add": hexes(o.Add), "remove": remove,
		"psks": hexes(o.PSKs), "publicMessage": o.Public}, &c)
	return &c, err
}

// StorePSK stores an external PSK for every member the driver holds.
func (d *Driver) StorePSK(ctx context.Context, id, secret []byte) error {
	return d.Call(ctx, "storePsk", map[string]any{"pskId": Hex(id), "secret": Hex(secret)}, nil)
}

// Processed is what processing one message did.
type Processed struct {
	Kind      string `json:"kind"` // "application" or "handshake" (a commit applied or a proposal cached)
	Plaintext Hex    `json:"plaintext"`
	Active    string `json:"active"` // "active", or "removedFromGroup" after the member's removal
}

// Process handles an MLSMessage: a commit or an application message.
func (m *Member) Process(ctx context.Context, msg []byte) (*Processed, error) {
	var p Processed
	err := m.d.Call(ctx, "process", map[string]any{"handle": m.Handle, "message": Hex(msg)}, &p)
	return &p, err
}

// Protect encrypts an application message with the given
// authenticated_data (may be empty) and returns its MLSMessage.
func (m *Member) Protect(ctx context.Context, plaintext, authenticatedData []byte) ([]byte, error) {
	var res struct {
		Message Hex `json:"message"`
	}
	err := m.d.Call(ctx, "protect", map[string]any{"handle": m.Handle, "plaintext": Hex(plaintext),
		"authenticatedData": Hex(authenticatedData)}, &res)
	return res.Message, err
}

// Export runs the MLS exporter of the member's current epoch.
func (m *Member) Export(ctx context.Context, label string, context []byte, length int) ([]byte, error) {
	var res struct {
		Secret Hex `json:"secret"`
	}
	err := m.d.Call(ctx, "export", map[string]any{"handle": m.Handle, "label": label, "context": Hex(context), "length": length}, &res)
	return res.Secret, err
}

// State is a member's view of its group.
type State struct {
	Epoch              uint64
	EpochAuthenticator []byte
	Leaf               uint32
	Active             string
	Members            map[uint32][]byte // leaf index -> credential identity
}

// State reports the member's epoch, epoch authenticator, leaf and members.
func (m *Member) State(ctx context.Context) (*State, error) {
	var res struct {
		Epoch              string `json:"epoch"`
		EpochAuthenticator Hex    `json:"epochAuthenticator"`
		Leaf               uint32 `json:"leaf"`
		Active             string `json:"active"`
		Members            []struct {
			Leaf     uint32 `json:"leaf"`
			Identity Hex    `json:"identity"`
		} `json:"members"`
	}
	if err := m.d.Call(ctx, "state", map[string]any{"handle": m.Handle}, &res); err != nil {
		return nil, err
	}
	epoch, err := strconv.ParseUint(res.Epoch, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("tsmls: epoch %q: %w", res.Epoch, err)
	}
	st := &State{Epoch: epoch, EpochAuthenticator: res.EpochAuthenticator, Leaf: res.Leaf, Active: res.Active, Members: map[uint32][]byte{}}
	for _, mb := range res.Members {
		st.Members[mb.Leaf] = mb.Identity
	}
	return st, nil
}

// GroupInfo returns the member's signed GroupInfo (an MLSMessage) with the
// external_pub extension in the encoding of RFC 9420 §12.4.3.2 and the
// ratchet_tree extension, for an external join.
func (m *Member) GroupInfo(ctx context.Context) ([]byte, error) {
	var res struct {
		GroupInfo Hex `json:"groupInfo"`
	}
	err := m.d.Call(ctx, "groupInfo", map[string]any{"handle": m.Handle}, &res)
	return res.GroupInfo, err
}

// ExternalJoin makes a new ts-mls member with a basic credential for
// identity join by an external commit from groupInfo (an MLSMessage); it
// returns the member and the commit (a PublicMessage) for the group.
func (d *Driver) ExternalJoin(ctx context.Context, groupInfo, identity []byte) (*Member, []byte, error) {
	var res struct {
		Handle string `json:"handle"`
		Commit Hex    `json:"commit"`
	}
	err := d.Call(ctx, "externalJoin", map[string]any{"groupInfo": Hex(groupInfo), "identity": Hex(identity)}, &res)
	return &Member{d: d, Handle: res.Handle}, res.Commit, err
}

// NativeGroupInfo returns the GroupInfo exactly as ts-mls 1.6.4 makes it,
// whose external_pub extension holds the bare key rather than the
// ExternalPub struct of RFC 9420 §12.4.3.2 (see driver.mjs).
func (m *Member) NativeGroupInfo(ctx context.Context) ([]byte, error) {
	var res struct {
		GroupInfo Hex `json:"groupInfo"`
	}
	err := m.d.Call(ctx, "groupInfo", map[string]any{"handle": m.Handle, "native": true}, &res)
	return res.GroupInfo, err
}

// ProposeAdd sends a proposal to add the key package kp (an MLSMessage),
// as a PublicMessage when public is set, and returns its MLSMessage.
func (m *Member) ProposeAdd(ctx context.Context, kp []byte, public bool) ([]byte, error) {
	var res struct {
		Message Hex `json:"message"`
	}
	err := m.d.Call(ctx, "propose", map[string]any{"handle": m.Handle, "add": Hex(kp), "publicMessage": public}, &res)
	return res.Message, err
}
