package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/core/internal/mlsframe"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// groupInfoTopic returns a group's GroupInfo topic: 0x05 || group id.
func groupInfoTopic(groupID []byte) []byte {
	return append([]byte{byte(ports.TopicGroupInfo)}, groupID...)
}

// commitBatch is the Publish batch of a commit: the commit on the group's
// topic and, when known, the GroupInfo of the epoch it leads to on the
// GroupInfo topic, so that the delivery service stores both or neither
// (COMP-395).
func commitBatch(groupID, commit, groupInfo []byte) []*backendpb.ClientEnvelope {
	envs := []*backendpb.ClientEnvelope{{TargetTopic: groupTopic(groupID),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: commit}}}
	if len(groupInfo) > 0 {
		envs = append(envs, &backendpb.ClientEnvelope{TargetTopic: groupInfoTopic(groupID),
			Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: groupInfo}})
	}
	return envs
}

// groupInfoToSend returns gi, or nil when it exceeds
// Options.MaxGroupInfoBytes: a delivery service would refuse the whole
// batch, the commit with it.
func (c *Client) groupInfoToSend(groupID, gi []byte) []byte {
	if len(gi) > c.opts.MaxGroupInfoBytes {
		c.logger.Warn("GroupInfo too large to publish with the commit", "group", fmt.Sprintf("%x", groupID),
			"bytes", len(gi), "limit", c.opts.MaxGroupInfoBytes)
		return nil
	}
	return gi
}

// groupInfoHeader is what the client reads of a GroupInfo MLSMessage
// before handing it to the engine, which verifies it: its group and
// epoch.
type groupInfoHeader struct {
	groupID []byte
	epoch   uint64
}

// wireGroupInfo is the wire format of an MLSMessage carrying a GroupInfo
// (RFC 9420 §6).
const wireGroupInfo = mlsframe.WireGroupInfo

// peekGroupInfo reads the group id and epoch of a GroupInfo MLSMessage;
// ok is false for anything else or anything truncated.
func peekGroupInfo(b []byte) (h groupInfoHeader, ok bool) {
	var id []byte
	id, h.epoch, ok = mlsframe.PeekGroupInfo(b)
	h.groupID = bytes.Clone(id)
	return h, ok
}

// ErrNoGroupInfo is wrapped when the delivery service holds no usable
// GroupInfo for a group: none, one of another group, or one older than
// the state a resync must reach.
var ErrNoGroupInfo = errors.New("no usable GroupInfo on the delivery service")

// newestGroupInfo returns the newest GroupInfo of the group on the
// delivery service, its header and its sequence id, or an error wrapping
// [ErrNoGroupInfo].
func (c *Client) newestGroupInfo(ctx context.Context, groupID []byte) ([]byte, groupInfoHeader, uint64, error) {
	env, err := c.deps.Transport.QueryNewest(ctx, groupInfoTopic(groupID))
	if errors.Is(err, ports.ErrNotFound) {
		return nil, groupInfoHeader{}, 0, fmt.Errorf("group %x: %w", groupID, ErrNoGroupInfo)
	}
	if err != nil {
		return nil, groupInfoHeader{}, 0, fmt.Errorf("group info of %x: %w", groupID, err)
	}
	if env.GetPending() {
		// A pending commit's GroupInfo is no epoch of the group yet
		// (ADR-0030): the newest confirmed one is (COMP-445).
		if env, err = c.newestConfirmedGroupInfo(ctx, groupID); err != nil {
			return nil, groupInfoHeader{}, 0, err
		}
	}
	gi := env.GetEnvelope().GetGroupMessage()
	h, ok := peekGroupInfo(gi)
	if !ok || !bytes.Equal(h.groupID, groupID) {
		return nil, groupInfoHeader{}, 0, fmt.Errorf("group %x: the newest envelope on its GroupInfo topic is no GroupInfo of it: %w", groupID, ErrNoGroupInfo)
	}
	return gi, h, env.GetSequenceId(), nil
}

// PublishGroupInfo publishes the GroupInfo of the epoch this installation
// holds when the delivery service's newest one for the group is older or
// missing, and reports whether it did (COMP-397). Every commit carries
// its own GroupInfo, so it is needed only where that one went missing —
// a commit by a client that did not publish one, a group created before
// GroupInfo was published, a delivery service restored from a backup —
// and an app calls it when a member asks for it (a member that must
// resync and finds [ErrNoGroupInfo]); regroup never publishes one per
// member per commit.
func (cv *Conversation) PublishGroupInfo(ctx context.Context) (bool, error) {
	c := cv.c
	defer c.lock(cv.id)()
	if err := c.processGroup(ctx, cv.id); err != nil {
		return false, err
	}
	return c.publishGroupInfo(ctx, cv.id, true)
}

// publishGroupInfo publishes the GroupInfo of the group's current epoch;
// onlyIfNewer publishes it only when the service's newest is older. An
// engine without [ports.MLSExternal] publishes nothing. The caller holds
// the group's lock.
func (c *Client) publishGroupInfo(ctx context.Context, groupID []byte, onlyIfNewer bool) (bool, error) {
	x, ok := c.deps.MLS.(ports.MLSExternal)
	if !ok {
		return false, nil
	}
	var gi []byte
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		gi, err = x.GroupInfo(ctx, tx, groupID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("group info of %x: %w", groupID, err)
	}
	if len(gi) > c.opts.MaxGroupInfoBytes {
		return false, fmt.Errorf("group info of %x: %d bytes, limit %d: %w", groupID, len(gi), c.opts.MaxGroupInfoBytes, ports.ErrInvalidArgument)
	}
	if onlyIfNewer {
		mine, _ := peekGroupInfo(gi)
		_, held, _, err := c.newestGroupInfo(ctx, groupID)
		switch {
		case err == nil && held.epoch >= mine.epoch:
			return false, nil
		case err != nil && !errors.Is(err, ErrNoGroupInfo):
			return false, err
		}
	}
	env := &backendpb.ClientEnvelope{TargetTopic: groupInfoTopic(groupID), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: gi}}
	if _, err := publishRetry(ctx, c.deps.Transport, []*backendpb.ClientEnvelope{env}); err != nil {
		return false, fmt.Errorf("publish group info of %x: %w", groupID, err)
	}
	return true, nil
}
