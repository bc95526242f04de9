// Package docs holds regroup's documentation. It has no code: its test
// checks that every Go block of README.md and docs/*.md is the compiled
// code it names (see snippet_test.go).
package docs
