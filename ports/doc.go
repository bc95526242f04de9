// Package ports holds the interfaces regroup's core uses to reach the
// outside world, and the value types they exchange. It contains no logic.
//
// The dependency rule is core → ports ← adapters: core packages see MLS,
// storage, transport, wrapper algorithms, identity and time only through
// these interfaces, and adapters implement them without importing core.
//
// # Errors
//
// Every port reports failures as errors that wrap one of the sentinels in
// this package (for example [ErrNotFound], [ErrConflict], [ErrWrongEpoch]),
// so callers decide with errors.Is and never by matching text. Where a
// caller needs fields, a typed error carries them and unwraps to its
// sentinel (for example [*WrongEpochError]).
//
// # Writing an adapter
//
// Each port has an exported contract suite in a sibling package
// (ports/storetest, ports/wrappertest, ports/transporttest, ports/mlstest):
// implement its Harness and call its Run from a test in the adapter's
// package. docs/adapter-guide.md walks through it.
package ports
