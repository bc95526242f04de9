package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/identity"
)

// Identity custody (COMP-261 to COMP-264): the inbox's recovery key is
// handed out once by init and stored in no home unless asked; another
// installation joins by a request one of the user's installations
// approves; revoking asks for the recovery key.

// helpCustody closes `regroup help`: the recovery key and devices.
const helpCustody = `
Your devices and the recovery key: init prints the inbox's recovery key once
(or writes it to --recovery-key-out FILE) and no home stores it. Keep it off
your devices. Another device joins with ` + "`init --join INBOX`" + `, which prints a
request that ` + "`approve`" + ` takes on a device already in the inbox. To cut off a
lost device, run ` + "`revoke INSTALLATION`" + ` on any device: it asks for the recovery
key. A revoked device cannot add, approve or revoke anything, but the devices
it approved before its revocation stay: revoke prints them, and
` + "`installations`" + ` shows who approved each; revoke every one that is not yours.
A home made by an older regroup stores the key: move it out with
` + "`export-recovery-key --out FILE`" + `.
`

// custodyOpts are the flags of init, approve, revoke and
// export-recovery-key.
type custodyOpts struct {
	// recoveryOut is the file init or export-recovery-key writes the
	// recovery key to; empty: init prints it.
	recoveryOut string
	// keep stores the recovery key in the home as well.
	keep bool
	// join makes init request an installation of this inbox instead of
	// creating one.
	join string
	// recoveryFile is the file holding the recovery key (revoke; init with
	// --join adds the installation with it instead of by request).
	recoveryFile string
}

// prompt is where revoke asks for a recovery key, which it reads from
// stdin (edges.go).
var prompt io.Writer = os.Stderr

func initFlags(fs *flag.FlagSet, o *opts) {
	fs.StringVar(&o.custody.recoveryOut, "recovery-key-out", "", "write the new inbox's recovery key to `FILE` (created, mode 0600) instead of printing it")
	fs.BoolVar(&o.custody.keep, "keep-recovery-key", false, "also store the recovery key in the home (a revoked device would keep it)")
	fs.StringVar(&o.custody.join, "join", "", "make this installation another one of `INBOX`: print a request to approve on one of its installations")
	fs.StringVar(&o.custody.recoveryFile, "recovery-key-file", "", "with --join: add this installation with the recovery key in `FILE` instead of a request")
}

func revokeFlags(fs *flag.FlagSet, o *opts) {
	fs.StringVar(&o.custody.recoveryFile, "recovery-key-file", "", "read the inbox's recovery key from `FILE` (default: ask on standard input)")
}

func exportFlags(fs *flag.FlagSet, o *opts) {
	fs.StringVar(&o.custody.recoveryOut, "out", "", "write the recovery key to `FILE` (created, mode 0600)")
	fs.BoolVar(&o.custody.keep, "keep", false, "keep the recovery key in the home too, on purpose")
}

// recoveryKeyText is how a recovery key is written and read: the hex of
// its 32-byte seed.
func recoveryKeyText(k ed25519.PrivateKey) string { return hex.EncodeToString(k.Seed()) }

// parseRecoveryKey reads a recovery key written by recoveryKeyText;
// spaces and line breaks are ignored.
func parseRecoveryKey(s string) (ed25519.PrivateKey, error) {
	s = strings.Join(strings.Fields(s), "")
	seed, err := hex.DecodeString(s)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, usagef("a recovery key is %d hex digits (as init printed or wrote it)", 2*ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// readRecoveryKey reads the recovery key from --recovery-key-file, or asks
// for it on standard input.
func readRecoveryKey(e *env, stderr io.Writer) (ed25519.PrivateKey, error) {
	if f := e.o.custody.recoveryFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("recovery key: %w", err)
		}
		return parseRecoveryKey(string(b))
	}
	fmt.Fprint(stderr, "the inbox's recovery key (as init printed it): ")
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && line == "" {
		return nil, usagef("no recovery key given: type it, or pass --recovery-key-file FILE")
	}
	return parseRecoveryKey(line)
}

// createKeyFile creates path for a secret, failing when it exists.
func createKeyFile(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, usagef("recovery key file: %v (it is never overwritten)", err)
	}
	return f, nil
}

// writeKeyFile writes k to f and closes it.
func writeKeyFile(f *os.File, k ed25519.PrivateKey) error {
	_, err := fmt.Fprintln(f, recoveryKeyText(k))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the recovery key to %s: %w", f.Name(), err)
	}
	return nil
}

// initJSON is the --json output of init.
type initJSON struct {
	whoamiJSON
	// RecoveryKey is the new inbox's recovery key, when init printed it.
	RecoveryKey string `json:"recovery_key,omitempty"`
	// RecoveryKeyFile is where init wrote it, when it did.
	RecoveryKeyFile string `json:"recovery_key_file,omitempty"`
	// Request is the request to approve, for init --join.
	Request string `json:"request,omitempty"`
}

// cmdInit creates the home's installation: a new inbox (its recovery key
// printed or written once), or, with --join, another installation of an
// inbox.
func cmdInit(ctx context.Context, e *env) error {
	if _, err := os.Stat(filepath.Join(e.o.home, configFile)); err == nil {
		return fmt.Errorf("%s already holds an installation: `regroup whoami --home %s` shows it; pass another --home for another user",
			e.o.home, e.o.home)
	}
	c := e.o.custody
	if c.join != "" && c.recoveryFile == "" {
		return initJoin(ctx, e)
	}
	var recovery ed25519.PrivateKey
	if c.join != "" {
		var err error
		if recovery, err = readRecoveryKey(e, io.Discard); err != nil {
			return err
		}
		if identity.InboxID(recovery.Public().(ed25519.PublicKey)) != c.join {
			return usagef("the recovery key in %s is not inbox %s's", c.recoveryFile, c.join)
		}
	}
	out, err := createKeyFile(c.recoveryOut)
	if err != nil {
		return err
	}
	if out != nil {
		defer func() {
			if out != nil { // init failed before the key existed
				out.Close()
				os.Remove(out.Name())
			}
		}()
	}
	if err := os.MkdirAll(e.o.home, 0o700); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	storePath := filepath.Join(e.o.home, storeFile)
	_, statErr := os.Stat(storePath)
	s, err := openSession(ctx, openOptions{home: e.o.home, server: e.o.server, create: true, flags: e.o,
		identity: regroup.IdentityConfig{RecoveryKey: recovery, KeepRecoveryKey: c.keep}})
	if err != nil {
		e.failed = s
		if errors.Is(statErr, os.ErrNotExist) {
			// The identity this init stored is dropped with its store: its
			// recovery key was never shown, so a retry must make a new one.
			for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
				os.Remove(storePath + suffix)
			}
		}
		return err
	}
	defer s.Close()
	e.s = s
	if _, err := os.Stat(filepath.Join(e.o.home, configFile)); err == nil { // an init that ran while this one waited for the home
		return fmt.Errorf("%s already holds an installation: `regroup whoami --home %s` shows it", e.o.home, e.o.home)
	}
	v := initJSON{whoamiJSON: whoami(s)}
	if created := s.c.Identity().RecoveryKey; recovery == nil && created != nil {
		v.RecoveryKey = recoveryKeyText(created)
		if f := out; f != nil {
			out = nil
			if err := writeKeyFile(f, created); err != nil {
				s.warn("%v: printing it instead", err)
			} else {
				v.RecoveryKey, v.RecoveryKeyFile = "", f.Name()
			}
		}
	}
	rec := s.recovery
	set := settings{Server: s.server, Recovery: &rec}
	if s.tls.TLS {
		t := s.tls
		set.TLS = &t
	}
	if err := saveSettings(e.o.home, set); err != nil {
		return err
	}
	return e.out.emit(v, func(w io.Writer) {
		if recovery != nil {
			fmt.Fprintf(w, "installation %s added to inbox %s with the recovery key, in %s; its key package is published on regroupd at %s\n",
				v.InstallationKey, s.c.InboxID(), s.home, s.server)
			return
		}
		fmt.Fprintf(w, "inbox %s created in %s; its key package is published on regroupd at %s\n", s.c.InboxID(), s.home, s.server)
		fmt.Fprintln(w, "others add you by this inbox id: `regroup group create NAME INBOX` or `regroup group add CONVERSATION INBOX`")
		switch {
		case v.RecoveryKeyFile != "":
			fmt.Fprintf(w, "the inbox's recovery key is in %s: move it off this device and keep it safe; `regroup revoke` asks for it\n", v.RecoveryKeyFile)
		case v.RecoveryKey != "":
			fmt.Fprintf(w, "the inbox's recovery key, shown once: %s\n", v.RecoveryKey)
			fmt.Fprintln(w, "write it down and keep it apart from your devices; `regroup revoke` asks for it")
		}
		if c.keep {
			fmt.Fprintln(w, "the home stores the recovery key too (--keep-recovery-key): whoever takes this device can revoke your installations")
		} else {
			fmt.Fprintln(w, "the home does not store the recovery key: without it no installation of this inbox can be revoked")
		}
	})
}

// initJoin makes the home's installation a requested installation of
// --join's inbox: it stores the identity and prints the request, which
// one of the inbox's installations approves with `regroup approve`.
func initJoin(ctx context.Context, e *env) error {
	if e.o.custody.recoveryOut != "" || e.o.custody.keep {
		return usagef("--join adds an installation to an inbox that exists; --recovery-key-out and --keep-recovery-key are for a new inbox")
	}
	if _, err := identity.Topic(e.o.custody.join); err != nil {
		return usagef("--join %q: an inbox id is 64 lowercase hex digits", e.o.custody.join)
	}
	if err := os.MkdirAll(e.o.home, 0o700); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	server := e.o.server
	if server == "" {
		server = defaultServer
	}
	store, closeStore, err := regroup.OpenSQLiteStore(ctx, filepath.Join(e.o.home, storeFile))
	if err != nil {
		return err
	}
	defer closeStore()
	tr, closeTr, err := regroup.DialTransport(server, nil, identity.Installation{})
	if err != nil {
		return fmt.Errorf("regroupd at %s: %w", server, err)
	}
	defer closeTr()
	in, req, err := identity.RequestInstallation(ctx, identity.Options{Store: store, Transport: tr, Clock: regroup.ProvideClock(nil)}, e.o.custody.join)
	if err != nil {
		return err
	}
	if err := saveSettings(e.o.home, settings{Server: server}); err != nil {
		return err
	}
	v := initJSON{whoamiJSON: whoamiJSON{InboxID: in.InboxID, InstallationKey: hex.EncodeToString(in.PublicKey()), Home: e.o.home, Server: server},
		Request: hex.EncodeToString(req)}
	return e.out.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "installation %s of inbox %s created in %s, not yet part of the inbox\n", v.InstallationKey, v.InboxID, e.o.home)
		fmt.Fprintf(w, "on one of the inbox's installations, run:\n  regroup approve %s\nthen use this one\n", v.Request)
	})
}

// approveJSON is the --json output of approve.
type approveJSON struct {
	InboxID         string `json:"inbox_id"`
	InstallationKey string `json:"installation_key"`
	SequenceID      uint64 `json:"identity_sequence_id"`
}

// cmdApprove authorises another installation's request with this one.
func cmdApprove(ctx context.Context, e *env) error {
	b, err := hex.DecodeString(strings.TrimSpace(e.args[0]))
	if err != nil {
		return usagef("a request is the hex `regroup init --join` printed")
	}
	req, err := identity.DecodeAddRequest(b)
	if err != nil {
		return usagef("%v", err)
	}
	if req.GetInboxId() != e.s.c.InboxID() {
		return usagef("the request is for inbox %s; this installation is of inbox %s", req.GetInboxId(), e.s.c.InboxID())
	}
	list, _, err := e.s.installations(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(list, func(in installationJSON) bool { return in.This }) {
		return fmt.Errorf("this installation is not one of inbox %s's (revoked, or its own request not approved yet): "+
			"approve on another installation", e.s.c.InboxID())
	}
	seq, err := identity.Authorize(ctx, e.s.identityOptions(), b)
	if err != nil {
		return err
	}
	v := approveJSON{InboxID: req.GetInboxId(), InstallationKey: hex.EncodeToString(req.GetAddInstallation().GetInstallationKey()), SequenceID: seq}
	return e.out.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "installation %s added to inbox %s (identity update %d), approved by this installation\n", v.InstallationKey, v.InboxID, seq)
	})
}

func (s *session) identityOptions() identity.Options {
	return identity.Options{Store: s.store, Transport: s.transport, Clock: regroup.ProvideClock(nil)}
}

// installationJSON is one installation in --json output.
type installationJSON struct {
	Key string `json:"installation_key"`
	// AddedBy is the installation that approved it; empty when the
	// recovery key did.
	AddedBy string `json:"added_by,omitempty"`
	This    bool   `json:"this_installation,omitempty"`
}

// installations reads the inbox's identity topic to its end and returns
// its installations, and the resolver that read them.
func (s *session) installations(ctx context.Context) ([]installationJSON, *identity.Resolver, error) {
	r, err := identity.NewResolver(identity.ResolverOptions{Store: s.store, Transport: s.transport, Clock: regroup.ProvideClock(nil)})
	if err != nil {
		return nil, nil, err
	}
	inbox := s.c.InboxID()
	if err := r.Sync(ctx, inbox); err != nil {
		return nil, nil, err
	}
	as, err := r.Associations(ctx, inbox)
	if err != nil {
		return nil, nil, err
	}
	var out []installationJSON
	for _, a := range as {
		v := installationJSON{Key: hex.EncodeToString(a.InstallationKey), This: bytes.Equal(a.InstallationKey, s.c.InstallationKey())}
		if a.AuthorizedBy != nil {
			v.AddedBy = hex.EncodeToString(a.AuthorizedBy)
		}
		out = append(out, v)
	}
	return out, r, nil
}

// cmdInstallations lists the inbox's installations.
func cmdInstallations(ctx context.Context, e *env) error {
	list, _, err := e.s.installations(ctx)
	if err != nil {
		return err
	}
	return e.out.emit(list, func(w io.Writer) {
		for _, in := range list {
			line := in.Key
			if in.This {
				line += "  (this installation)"
			}
			if in.AddedBy != "" {
				line += "  approved by " + in.AddedBy
			}
			fmt.Fprintln(w, line)
		}
	})
}

// revokeJSON is the --json output of revoke.
type revokeJSON struct {
	InstallationKey string `json:"installation_key"`
	SequenceID      uint64 `json:"identity_sequence_id"`
	// AddedByRevoked are installations still associated that the revoked
	// one approved, directly or through another (COMP-263).
	AddedByRevoked []string `json:"added_by_revoked"`
}

// cmdRevoke revokes an installation of the inbox with the recovery key,
// which it asks for, then names the installations the revoked one added.
func cmdRevoke(ctx context.Context, e *env) error {
	list, r, err := e.s.installations(ctx)
	if err != nil {
		return err
	}
	var target []byte
	for _, in := range list {
		if strings.HasPrefix(in.Key, strings.ToLower(e.args[0])) {
			if target != nil {
				return usagef("%q names more than one installation: give more digits", e.args[0])
			}
			target, _ = hex.DecodeString(in.Key)
		}
	}
	if target == nil || len(e.args[0]) < 8 {
		return fmt.Errorf("%w: no installation of inbox %s starts with %q (8 hex digits or more; `regroup installations` lists them)",
			errNotFound, e.s.c.InboxID(), e.args[0])
	}
	recovery, err := readRecoveryKey(e, prompt)
	if err != nil {
		return err
	}
	seq, err := identity.Revoke(ctx, e.s.identityOptions(), recovery, target)
	if errors.Is(err, identity.ErrWrongRecoveryKey) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	if err := r.Sync(ctx, e.s.c.InboxID()); err != nil {
		return err
	}
	added, err := r.AddedBy(ctx, e.s.c.InboxID(), target)
	if err != nil {
		return err
	}
	v := revokeJSON{InstallationKey: hex.EncodeToString(target), SequenceID: seq, AddedByRevoked: []string{}}
	for _, k := range added {
		v.AddedByRevoked = append(v.AddedByRevoked, hex.EncodeToString(k))
	}
	return e.out.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "installation %s revoked (identity update %d): it can no longer add, approve or re-add installations\n", v.InstallationKey, seq)
		for _, k := range v.AddedByRevoked {
			fmt.Fprintf(w, "installation %s was approved by the revoked one and stays: if it is not yours, `regroup revoke %s`\n", k, k)
		}
	})
}

// cmdExportRecoveryKey moves a recovery key the home stores (a home made
// before recovery-key custody stores it without being asked) to a file.
func cmdExportRecoveryKey(ctx context.Context, e *env) error {
	if e.o.custody.recoveryOut == "" {
		return usagef("--out FILE is required")
	}
	f, err := createKeyFile(e.o.custody.recoveryOut)
	if err != nil {
		return err
	}
	key, err := identity.ExportRecoveryKey(ctx, e.s.store, e.o.custody.keep)
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		if errors.Is(err, identity.ErrNoRecoveryKey) {
			return fmt.Errorf("%w: this home does not store the recovery key", errNotFound)
		}
		return err
	}
	if err := writeKeyFile(f, key); err != nil {
		return fmt.Errorf("%w; the key was: %s", err, recoveryKeyText(key))
	}
	return e.out.emit(map[string]string{"recovery_key_file": f.Name()}, func(w io.Writer) {
		fmt.Fprintf(w, "the inbox's recovery key is in %s: move it off this device and keep it safe\n", f.Name())
		if !e.o.custody.keep {
			fmt.Fprintln(w, "this home no longer stores it; on each other installation of the inbox made before, run `regroup export-recovery-key --out FILE` too and keep one copy")
		}
	})
}

// warnLegacyRecoveryKey warns when the home stores the recovery key
// because it was made before recovery-key custody (COMP-262).
func warnLegacyRecoveryKey(s *session) {
	if s.c != nil && s.c.Identity().LegacyRecoveryKey {
		s.warn("this home stores the inbox's recovery key (made by an older regroup): run `regroup export-recovery-key --out FILE` and keep the file apart")
	}
}
