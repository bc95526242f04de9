package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// A home is the directory that holds one CLI user's installation: its
// SQLite store (client.db) and its settings (config.json).
const (
	storeFile  = "client.db"
	configFile = "config.json"
	// defaultServer is regroupd's default listen address.
	defaultServer = "127.0.0.1:5050"
	// homeEnv names the home when --home is not given.
	homeEnv = "REGROUP_HOME"
)

// settings are what init saves in a home.
type settings struct {
	// Server is the regroupd address every command dials unless --server
	// overrides it: host:port, or several, comma-separated, of replicas
	// sharing one database.
	Server string `json:"server"`
	// Recovery is the fork recovery policy; absent (a home made before
	// it existed) means defaultRecovery.
	Recovery *recoverySettings `json:"recovery,omitempty"`
	// TLS is how Server is reached; absent is plain text.
	TLS *tlsSettings `json:"tls,omitempty"`
}

// Errors a command maps to an exit code (see exitCode).
var (
	// errNoIdentity reports a home that init has not run in.
	errNoIdentity = errors.New("no identity here")
	// errNotFound reports a conversation or inbox the command cannot find.
	errNotFound = errors.New("not found")
	// errUsage reports a command line that cannot run; usagef makes one.
	errUsage = errors.New("usage")
)

// usageError is a usage error whose message is its own.
type usageError struct{ err error }

func (e *usageError) Error() string        { return e.err.Error() }
func (e *usageError) Unwrap() error        { return e.err }
func (e *usageError) Is(target error) bool { return target == errUsage }

// usagef returns an error wrapping errUsage with the message of format.
func usagef(format string, a ...any) error { return &usageError{fmt.Errorf(format, a...)} }

// homeDir returns the home: flag, else $REGROUP_HOME, else ~/.regroup.
func homeDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv(homeEnv); env != "" {
		return env, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", usagef("no home directory (%v): pass --home DIR or set %s", err, homeEnv)
	}
	return filepath.Join(h, ".regroup"), nil
}

func loadSettings(home string) (settings, error) {
	var s settings
	b, err := os.ReadFile(filepath.Join(home, configFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("%w in %s: run `regroup init --home %s --server ADDR`", errNoIdentity, home, home)
	}
	if err != nil {
		return s, fmt.Errorf("read settings: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("settings %s: %w", filepath.Join(home, configFile), err)
	}
	return s, nil
}

func saveSettings(home string, s settings) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(home, configFile), append(b, '\n'), 0o600)
}

// session is one command's open installation: the client and what it
// runs on. Close releases all of it.
type session struct {
	home      string
	server    string
	c         *client.Client
	store     ports.Store
	engine    *mlsfault.Engine
	transport *watchedTransport
	closers   []func()
	// warn reports a problem that does not stop the command.
	warn func(format string, a ...any)
	// progressOut receives the progress of long syncs; nil draws none.
	progressOut io.Writer
	// recovery is the policy in effect: saved, overridden by the flags.
	recovery recoverySettings
	// tls is how regroupd is reached (saved, overridden by the flags);
	// tlsConfig is its configuration, nil for plain text.
	tls       tlsSettings
	tlsConfig *tls.Config
}

// Close closes the client, the connection and the store.
func (s *session) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// openOptions choose how a session is opened.
type openOptions struct {
	home   string
	server string // overrides the saved server when set
	// create makes a new identity when the home holds none (init), as
	// identity chooses.
	create   bool
	identity regroup.IdentityConfig
	// flags are the command line's, whose recovery flags override the
	// saved policy.
	flags opts
	// warn reports, while opening, a problem that does not stop the
	// command (waiting for the home's lock); nil reports nothing.
	warn func(format string, a ...any)
}

// openSession assembles the installation of the home from the root
// package's providers, as regroup.NewNetworked does, with two additions
// the CLI needs: the MLS engine behind an [mlsfault.Engine], so that
// `sync --inject-fault` can fork it on purpose, and a transport that
// reports the progress of a sync.
func openSession(ctx context.Context, o openOptions) (*session, error) {
	s := &session{home: o.home, server: o.server, warn: func(string, ...any) {}}
	if o.warn != nil {
		s.warn = o.warn
	}
	s.recovery = defaultRecovery
	if !o.create {
		set, err := loadSettings(o.home)
		if err != nil {
			return nil, err
		}
		if s.server == "" {
			s.server = set.Server
		}
		if set.Recovery != nil {
			s.recovery = *set.Recovery
		}
		if set.TLS != nil {
			s.tls = *set.TLS
		}
	}
	rec, err := s.recovery.apply(o.flags)
	if err != nil {
		return nil, err
	}
	s.recovery, s.tls = rec, s.tls.apply(o.flags)
	if s.tlsConfig, err = s.tls.config(); err != nil {
		return nil, err
	}
	if s.server == "" {
		s.server = defaultServer
	}
	if err := s.open(ctx, o); err != nil {
		s.Close()
		return s, err // closed, for the error's explanation
	}
	return s, nil
}

func (s *session) open(ctx context.Context, o openOptions) error {
	create := o.create
	path := filepath.Join(s.home, storeFile)
	if !create {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("%w in %s (%v): run `regroup init --home %s --server ADDR`", errNoIdentity, s.home, err, s.home)
		}
	}
	store, closeStore, err := openStore(ctx, s.home, path, func(pid int) {
		s.warn("waiting for the other regroup command using %s (%s) to finish", s.home, holder(pid))
	})
	if errors.Is(err, errBusy) {
		return err
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	s.store, s.closers = store, append(s.closers, closeStore)
	clk := regroup.ProvideClock(nil)
	var in identity.Installation
	if create {
		in, err = regroup.ProvideInstallation(ctx, store, clk, o.identity)
	} else if in, err = identity.Load(ctx, store); errors.Is(err, identity.ErrNoIdentity) {
		err = fmt.Errorf("%w in %s: run `regroup init --home %s --server ADDR`", errNoIdentity, s.home, s.home)
	}
	if err != nil {
		return err
	}
	tr, err := dial(s.server, s.tlsConfig, in)
	if err != nil {
		return fmt.Errorf("regroupd at %s: %w", s.server, err)
	}
	s.closers = append(s.closers, func() { _ = tr.Close() })
	s.transport = &watchedTransport{Transport: tr}
	c, eng, closeClient, err := faultableClient(ctx, store, in, s.transport, clk, &client.Options{Recovery: s.recovery.policy()})
	if err != nil {
		return fmt.Errorf("regroupd at %s: %w", s.server, err)
	}
	s.engine = eng
	s.c, s.closers = c, append(s.closers, closeClient)
	return nil
}
