package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

// step is one action of an mlswg harness script (configs/*.json). Step
// references (keyPackage, byReference, pskID, ciphertext) are 0-based
// indices of earlier steps.
type step struct {
	Action            string    `json:"action"`
	Actor             string    `json:"actor"`
	Members           []string  `json:"members"`
	Joiners           []string  `json:"joiners"`
	Clients           []string  `json:"clients"`
	KeyPackage        int       `json:"keyPackage"`
	ByReference       []int     `json:"byReference"`
	ByValue           []byValue `json:"byValue"`
	ForcePath         bool      `json:"force_path"`
	ExternalTree      bool      `json:"external_tree"`
	PskID             int       `json:"pskID"`
	EpochID           uint64    `json:"epochID"`
	Removed           string    `json:"removed"`
	Extensions        []ext     `json:"extensions"`
	AuthenticatedData string    `json:"authenticatedData"`
	Plaintext         string    `json:"plaintext"`
	Ciphertext        int       `json:"ciphertext"`
	// externalJoin
	Joiner        string `json:"joiner"`
	PSKs          []int  `json:"psks"`
	RemovePrior   bool   `json:"removePrior"`
	ExternalTree2 bool   `json:"externalTree"`
	// external proposals, reinit and branch (scripts_more_test.go)
	Signer                 string       `json:"signer"`
	Member                 string       `json:"member"`
	Description            *description `json:"description"`
	Proposer               string       `json:"proposer"`
	Committer              string       `json:"committer"`
	Welcomer               string       `json:"welcomer"`
	ExternalReinitProposal *int         `json:"externalReinitProposal"`
	ChangeCipherSuite      bool         `json:"changeCiphersuite"`
	ChangeGroupID          bool         `json:"changeGroupID"`
	ForcePath2             bool         `json:"forcePath"`
}

type byValue struct {
	ProposalType string `json:"proposalType"`
	KeyPackage   int    `json:"keyPackage"`
	Removed      string `json:"removed"`
	PskID        int    `json:"pskID"`
	EpochID      uint64 `json:"epochID"`
	Extensions   []ext  `json:"extensions"`
}

type ext struct {
	Type uint32 `json:"extension_type"`
	Data []byte `json:"extension_data"` // base64 in the configs
}

func protoExts(in []ext) []*mlsinteroppb.Extension {
	out := make([]*mlsinteroppb.Extension, len(in))
	for i, e := range in {
		out[i] = &mlsinteroppb.Extension{ExtensionType: e.Type, ExtensionData: e.Data}
	}
	return out
}

// configsDir finds the harness configs: $MLS_INTEROP_CONFIGS, or
// <repo root>/../shared/testdata/mls-interop/configs.
func configsDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("MLS_INTEROP_CONFIGS"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
	d := filepath.Join(dir, "..", "shared", "testdata", "mls-interop", "configs")
	if _, err := os.Stat(d); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mlswg harness configs not found: %v", err)
		}
		t.Skipf("mlswg harness configs not found: %v", err)
	}
	return d
}

// TestHarnessScripts plays the mlswg harness scripts of welcome_join.json,
// commit.json, external_join.json, application.json,
// external_proposals.json, reinit.json and branch.json in suites 3 and 1
// (welcome_join.json in every supported suite) against two clients over
// gRPC, the way the harness's test-runner does: actors alternate between
// the clients, every fullCommit is processed by the listed members, merged
// by the committer and joined by the joiners, and then every member agrees
// on StateAuth and Export and reads every other member's message.
func TestHarnessScripts(t *testing.T) {
	// Suite 3 with both handshake framings, every other supported suite
	// with PublicMessage handshakes; suites other than 1 and 3 play only
	// welcome_join.json (TestHarnessEverySuite plays the rest, and swaps
	// the roles).
	modes := []mode{{suite3, false, false}, {suite3, true, false}}
	for _, id := range ciphersuite.Supported() {
		if id != suite3 {
			modes = append(modes, mode{uint32(id), false, false})
		}
	}
	playConfigs(t, modes, func(file string, m mode) bool {
		return m.suite == suite3 || m.suite == 1 || file == "welcome_join.json"
	})
}

// TestHarnessEverySuite plays every script of every config but
// deep_random.json in every supported suite, with both handshake framings
// and both role assignments. It takes minutes, so it runs only when
// MLS_INTEROP_DEEP=1 (make interop sets it).
func TestHarnessEverySuite(t *testing.T) {
	if os.Getenv("MLS_INTEROP_DEEP") != "1" {
		t.Skip("set MLS_INTEROP_DEEP=1 to play every config in every suite")
	}
	var modes []mode
	for _, id := range ciphersuite.Supported() {
		for _, enc := range []bool{false, true} {
			for _, swap := range []bool{false, true} {
				modes = append(modes, mode{uint32(id), enc, swap})
			}
		}
	}
	playConfigs(t, modes, func(string, mode) bool { return true })
}

// mode is how a script is played: suite, handshake framing, and whether
// the two clients swap roles.
type mode struct {
	suite   uint32
	encrypt bool
	swap    bool
}

// harnessConfigs are the configs TestHarnessScripts plays (deep_random.json
// has its own test).
var harnessConfigs = []string{"welcome_join.json", "commit.json", "external_join.json", "application.json",
	"external_proposals.json", "reinit.json", "branch.json"}

// playConfigs plays every script of harnessConfigs in the modes keep
// admits, against two clients.
func playConfigs(t *testing.T, modes []mode, keep func(file string, m mode) bool) {
	dir := configsDir(t)
	clients := []mlsinteroppb.MLSClientClient{startClient(t), startClient(t)}
	for _, file := range harnessConfigs {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Scripts map[string][]step `json:"scripts"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		names := make([]string, 0, len(cfg.Scripts))
		for n := range cfg.Scripts {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			for _, m := range modes {
				if !keep(file, m) {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/suite%d/encrypt=%v/swap=%v", file, name, m.suite, m.encrypt, m.swap), func(t *testing.T) {
					cs := clients
					if m.swap {
						cs = []mlsinteroppb.MLSClientClient{clients[1], clients[0]}
					}
					r := &runner{t: t, ctx: testCtx(t), clients: cs, suite: m.suite, encrypt: m.encrypt}
					if err := r.play(cfg.Scripts[name]); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

type protected struct{ ct, aad, pt []byte }

// runner holds one script's actors and step outputs.
type runner struct {
	t       *testing.T
	ctx     context.Context
	clients []mlsinteroppb.MLSClientClient
	suite   uint32
	encrypt bool
	// senders bounds how many members send a message in each group
	// verification (0: all), for the large scripts.
	senders int

	assigned map[string]mlsinteroppb.MLSClientClient
	states   map[string]uint32 // actor -> state id
	txs      map[string]uint32 // actor -> transaction id of its last key package
	outputs  map[int][]byte    // key packages, proposals, psk ids by step index
	secrets  map[int][]byte    // psk secrets by step index
	cts      map[int]protected
	signers  map[string]signerRef
	gid      []byte // the group id of createGroup
}

func (r *runner) client(actor string) mlsinteroppb.MLSClientClient {
	if c, ok := r.assigned[actor]; ok {
		return c
	}
	c := r.clients[len(r.assigned)%len(r.clients)]
	r.assigned[actor] = c
	return c
}

func (r *runner) play(steps []step) error {
	r.assigned, r.states, r.txs = map[string]mlsinteroppb.MLSClientClient{}, map[string]uint32{}, map[string]uint32{}
	r.outputs, r.secrets, r.cts = map[int][]byte{}, map[int][]byte{}, map[int]protected{}
	r.signers = map[string]signerRef{}
	for i, s := range steps {
		if err := r.do(i, &s); err != nil {
			return fmt.Errorf("step %d %s by %s: %w", i, s.Action, s.Actor, err)
		}
	}
	return nil
}

func (r *runner) do(i int, s *step) error {
	c := r.client(s.Actor)
	id := r.states[s.Actor]
	var (
		p   *mlsinteroppb.ProposalResponse
		err error
	)
	switch s.Action {
	case "createGroup":
		gid := make([]byte, 16)
		_, _ = rand.Read(gid)
		r.gid = gid
		g, err := c.CreateGroup(r.ctx, &mlsinteroppb.CreateGroupRequest{GroupId: gid, CipherSuite: r.suite, EncryptHandshake: r.encrypt, Identity: []byte(s.Actor)})
		if err != nil {
			return err
		}
		r.states[s.Actor] = g.StateId
		if len(s.Members) == 0 {
			return nil
		}
		var refs [][]byte
		for _, m := range s.Members {
			kp, err := r.keyPackage(m)
			if err != nil {
				return err
			}
			p, err := c.AddProposal(r.ctx, &mlsinteroppb.AddProposalRequest{StateId: g.StateId, KeyPackage: kp})
			if err != nil {
				return err
			}
			refs = append(refs, p.Proposal)
		}
		return r.commit(s.Actor, &mlsinteroppb.CommitRequest{StateId: g.StateId, ByReference: refs}, nil, nil, s.Members)
	case "createKeyPackage":
		r.outputs[i], err = r.keyPackage(s.Actor)
		return err
	case "installExternalPSK":
		pskID, secret := make([]byte, 16), make([]byte, 32)
		_, _ = rand.Read(pskID)
		_, _ = rand.Read(secret)
		for _, who := range s.Clients {
			sid, ok := r.states[who]
			if !ok {
				sid = r.txs[who]
			}
			if _, err := r.client(who).StorePSK(r.ctx, &mlsinteroppb.StorePSKRequest{StateOrTransactionId: sid, PskId: pskID, PskSecret: secret}); err != nil {
				return err
			}
		}
		r.outputs[i], r.secrets[i] = pskID, secret
		return nil
	case "externalJoin":
		return r.externalJoin(s)
	case "addProposal":
		p, err = c.AddProposal(r.ctx, &mlsinteroppb.AddProposalRequest{StateId: id, KeyPackage: r.outputs[s.KeyPackage]})
	case "removeProposal":
		p, err = c.RemoveProposal(r.ctx, &mlsinteroppb.RemoveProposalRequest{StateId: id, RemovedId: []byte(s.Removed)})
	case "updateProposal":
		p, err = c.UpdateProposal(r.ctx, &mlsinteroppb.UpdateProposalRequest{StateId: id})
	case "externalPSKProposal":
		p, err = c.ExternalPSKProposal(r.ctx, &mlsinteroppb.ExternalPSKProposalRequest{StateId: id, PskId: r.outputs[s.PskID]})
	case "resumptionPSKProposal":
		p, err = c.ResumptionPSKProposal(r.ctx, &mlsinteroppb.ResumptionPSKProposalRequest{StateId: id, EpochId: s.EpochID})
	case "groupContextExtensionsProposal":
		p, err = c.GroupContextExtensionsProposal(r.ctx, &mlsinteroppb.GroupContextExtensionsProposalRequest{StateId: id, Extensions: protoExts(s.Extensions)})
	case "fullCommit":
		req := &mlsinteroppb.CommitRequest{StateId: id, ForcePath: s.ForcePath, ExternalTree: s.ExternalTree}
		for _, ref := range s.ByReference {
			req.ByReference = append(req.ByReference, r.outputs[ref])
		}
		for _, v := range s.ByValue {
			req.ByValue = append(req.ByValue, &mlsinteroppb.ProposalDescription{ProposalType: []byte(v.ProposalType),
				KeyPackage: r.outputs[v.KeyPackage], RemovedId: []byte(v.Removed), PskId: r.outputs[v.PskID],
				EpochId: v.EpochID, Extensions: protoExts(v.Extensions)})
		}
		return r.commit(s.Actor, req, req.ByReference, s.Members, s.Joiners)
	case "protect":
		pt := []byte(s.Plaintext)
		res, err := c.Protect(r.ctx, &mlsinteroppb.ProtectRequest{StateId: id, AuthenticatedData: []byte(s.AuthenticatedData), Plaintext: pt})
		if err != nil {
			return err
		}
		r.cts[i] = protected{ct: res.Ciphertext, aad: []byte(s.AuthenticatedData), pt: pt}
		return nil
	case "unprotect":
		want := r.cts[s.Ciphertext]
		res, err := c.Unprotect(r.ctx, &mlsinteroppb.UnprotectRequest{StateId: id, Ciphertext: want.ct})
		if err != nil {
			return err
		}
		if !bytes.Equal(res.Plaintext, want.pt) || !bytes.Equal(res.AuthenticatedData, want.aad) {
			return fmt.Errorf("unprotect of step %d: got %q / %q", s.Ciphertext, res.Plaintext, res.AuthenticatedData)
		}
		return nil
	default:
		return r.doMore(i, s)
	}
	if err != nil {
		return err
	}
	r.outputs[i] = p.Proposal
	return nil
}

func (r *runner) keyPackage(actor string) ([]byte, error) {
	kp, err := r.client(actor).CreateKeyPackage(r.ctx, &mlsinteroppb.CreateKeyPackageRequest{CipherSuite: r.suite, Identity: []byte(actor)})
	if err != nil {
		return nil, err
	}
	r.txs[actor] = kp.TransactionId
	return kp.KeyPackage, nil
}

// commit has committer commit req, members handle it with the proposals,
// the committer merge it and the joiners join; then the group is verified.
func (r *runner) commit(committer string, req *mlsinteroppb.CommitRequest, proposals [][]byte, members, joiners []string) error {
	c := r.client(committer)
	res, err := c.Commit(r.ctx, req)
	if err != nil {
		return err
	}
	if (len(res.RatchetTree) > 0) != req.ExternalTree {
		return fmt.Errorf("commit: ratchet tree of %d bytes with external_tree %v", len(res.RatchetTree), req.ExternalTree)
	}
	for _, m := range members {
		h, err := r.client(m).HandleCommit(r.ctx, &mlsinteroppb.HandleCommitRequest{StateId: r.states[m], Proposal: proposals, Commit: res.Commit})
		if err != nil {
			return fmt.Errorf("%s handles the commit: %w", m, err)
		}
		r.transition(m, h.StateId)
	}
	h, err := c.HandlePendingCommit(r.ctx, &mlsinteroppb.HandlePendingCommitRequest{StateId: req.StateId})
	if err != nil {
		return err
	}
	r.transition(committer, h.StateId)
	for _, j := range joiners {
		if len(res.Welcome) == 0 {
			return fmt.Errorf("commit has no Welcome for %s", j)
		}
		g, err := r.client(j).JoinGroup(r.ctx, &mlsinteroppb.JoinGroupRequest{TransactionId: r.txs[j], Welcome: res.Welcome,
			EncryptHandshake: r.encrypt, Identity: []byte(j), RatchetTree: res.RatchetTree})
		if err != nil {
			return fmt.Errorf("%s joins: %w", j, err)
		}
		r.states[j] = g.StateId
	}
	ms := []member{{c, r.states[committer]}}
	for _, m := range slices.Concat(members, joiners) {
		ms = append(ms, member{r.client(m), r.states[m]})
	}
	r.verify("after commit", ms)
	return nil
}

// externalJoin has the joiner join by external commit from the actor's
// GroupInfo; the actor and the members process the commit.
func (r *runner) externalJoin(s *step) error {
	gi, err := r.client(s.Actor).GroupInfo(r.ctx, &mlsinteroppb.GroupInfoRequest{StateId: r.states[s.Actor], ExternalTree: s.ExternalTree2})
	if err != nil {
		return err
	}
	req := &mlsinteroppb.ExternalJoinRequest{GroupInfo: gi.GroupInfo, RatchetTree: gi.RatchetTree, EncryptHandshake: r.encrypt,
		Identity: []byte(s.Joiner), RemovePrior: s.RemovePrior}
	for _, p := range s.PSKs {
		req.Psks = append(req.Psks, &mlsinteroppb.PreSharedKey{PskId: r.outputs[p], PskSecret: r.secrets[p]})
	}
	res, err := r.client(s.Joiner).ExternalJoin(r.ctx, req)
	if err != nil {
		return err
	}
	ms := []member{{r.client(s.Joiner), res.StateId}}
	for _, m := range append([]string{s.Actor}, s.Members...) {
		h, err := r.client(m).HandleCommit(r.ctx, &mlsinteroppb.HandleCommitRequest{StateId: r.states[m], Commit: res.Commit})
		if err != nil {
			return fmt.Errorf("%s handles the external commit: %w", m, err)
		}
		if !bytes.Equal(h.EpochAuthenticator, res.EpochAuthenticator) {
			return fmt.Errorf("%s disagrees with the external joiner", m)
		}
		r.transition(m, h.StateId)
		ms = append(ms, member{r.client(m), r.states[m]})
	}
	r.states[s.Joiner] = res.StateId
	r.verify("after external join", ms)
	return nil
}

func (r *runner) verify(step string, ms []member) {
	r.t.Helper()
	n := len(ms)
	if r.senders > 0 {
		n = min(n, r.senders)
	}
	verifyGroupFrom(r.t, r.ctx, step, ms, n)
}

// TestHarnessDeepRandom plays deep_random.json, the harness's large
// lifecycle (1,670 steps: adds, Update proposals, external joins and
// resyncs, removals), on suite 3 with PrivateMessage handshakes; each
// group verification checks every member's StateAuth and Export and a
// message from the committer to every member. It takes about a minute, so
// it runs only when MLS_INTEROP_DEEP=1 (make interop sets it).
func TestHarnessDeepRandom(t *testing.T) {
	if os.Getenv("MLS_INTEROP_DEEP") != "1" {
		t.Skip("set MLS_INTEROP_DEEP=1 to play deep_random.json (about a minute)")
	}
	dir := configsDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "deep_random.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Scripts map[string][]step `json:"scripts"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	clients := []mlsinteroppb.MLSClientClient{startClient(t), startClient(t)}
	for name, steps := range cfg.Scripts {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		r := &runner{t: t, ctx: ctx, clients: clients, suite: suite3, encrypt: true, senders: 1}
		if err := r.play(steps); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// transition moves actor to the state id a transition returned and frees
// the previous one, as a harness that keeps only current states does.
func (r *runner) transition(actor string, id uint32) {
	r.t.Helper()
	old := r.states[actor]
	if old == id {
		r.t.Fatalf("%s: a transition kept state id %d", actor, id)
	}
	if _, err := r.client(actor).Free(r.ctx, &mlsinteroppb.FreeRequest{StateId: old}); err != nil {
		r.t.Fatalf("%s: free state %d: %v", actor, old, err)
	}
	r.states[actor] = id
}
