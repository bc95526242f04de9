// Package keypackage builds, validates, publishes, rotates and destroys
// this installation's key packages (joining-groups sections 1 to 3).
//
// [Build] makes a key package for an installation: a basic credential
// holding its MlsCredential (JOIN-004), suite 0x0003 (JOIN-072), a wrapper
// key generated for this package and advertised in 0xff03, ChaCha20-Poly1305
// advertised in 0xff04, the last-resort mark with empty data, and the
// capabilities [CapabilityExtensions] and [CapabilityProposals] (JOIN-002).
//
// [Validator] is what a sender runs on a fetched package (JOIN-007, 008,
// 072, 082, 090, and the inbox and installation a package must name);
// [Validator.FetchInbox] fetches the newest package of every installation
// of an inbox and returns the usable ones and the failed installations
// (JOIN-093, JOIN-012); [Validator.FetchInboxes] does so for many inboxes,
// several installations at a time (COMP-131).
//
// [Manager] keeps this installation's packages: it publishes one, rotates
// it before it expires and after a Welcome to it is accepted, and destroys
// superseded private keys one day after a later package's publish was
// confirmed, never while a received Welcome is held (JOIN-003, 016, 074,
// 018, 019, 020). Every state lives in the [ports.Store] and every
// deadline runs on the [ports.Clock], so a restart resumes where it
// stopped.
//
// # Errors
//
// A rejected package wraps [ErrRejected] and one of the per-check
// sentinels ([ErrUnverifiable], [ErrCipherSuite], [ErrLifetime],
// [ErrCredential], [ErrWrongInbox], [ErrWrongInstallation],
// [ErrLastResortData], [ErrAddressing]), and names the check.
// [Validator.FetchInbox] fails with [ErrNoUsableInstallation] when no
// installation of the inbox has a usable package, and passes transport
// failures through; [Validator.FetchInboxes] returns those errors per
// inbox. The [Manager] refuses to publish for an installation
// its inbox does not associate with [ErrNotAssociated] (JOIN-001); a
// package the delivery service refused wraps [ports.ErrInvalidArgument].
package keypackage
