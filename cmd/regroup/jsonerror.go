package main

import (
	"encoding/json"
	"io"
)

// errorJSON is what a command run with --json prints on standard output
// when it fails, besides the message on standard error: one JSON
// document, so that a script reads every outcome from one place.
type errorJSON struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	// Command is the command that failed ("group create").
	Command string `json:"command"`
	// Kind names the exit code's class: usage, failure, not_found,
	// unavailable, busy or interrupted.
	Kind string `json:"kind"`
	// ExitCode is the process's exit code.
	ExitCode int `json:"exit_code"`
	// Message is what standard error says, exact.
	Message string `json:"message"`
}

// exitKinds names each exit code in errorJSON.
var exitKinds = map[int]string{exitFailure: "failure", exitUsage: "usage", exitNotFound: "not_found",
	exitUnavailable: "unavailable", exitBusy: "busy", exitInterrupted: "interrupted"}

// emitError prints a failed command's errorJSON.
func emitError(w io.Writer, command string, code int, message string) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(errorJSON{errorBody{Command: command, Kind: exitKinds[code], ExitCode: code, Message: message}})
}
