// Package contentspb holds the generated Go types of the payloads
// clients encrypt or sign for each other: commit-log entries, credentials,
// group metadata, one-shot readd messages and Welcome contents.
// Regenerate with `make proto`.
package contentspb
