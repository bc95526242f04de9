//go:build !race

package hostile_test

// raceBuild is set under the race detector (see race_test.go).
const raceBuild = false
