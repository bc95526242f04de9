package client

import "github.com/regroup-mls/regroup/ports"

// senderKind is the sender type of a processed message (RFC 9420 §6).
type senderKind string

const (
	senderMember    senderKind = "member"
	senderExternal  senderKind = "external"
	senderNewMember senderKind = "new member"
)

// senderOf returns the sender type of a processed message.
func senderOf(p ports.Processed) senderKind { return senderMember }
