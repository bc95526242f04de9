// Package hostile holds the end-to-end proof of the client against a
// hostile delivery service: its tests run the client's scenarios (a group,
// a DM, a re-add, a fork repair, a key-package rotation) with every
// member's transport behind one ports/transportfault Operator, under each
// fault alone and under seeded random mixes, and check after each run the
// invariants the scenario promises. docs/reliability.md tabulates the
// outcomes and the command that reproduces each.
//
// The package has no code of its own outside its tests.
package hostile
