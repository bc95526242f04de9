// Package protocol is what the plugin host and the plugin sdk agree on: the
// go-plugin handshake, the versioned plugin sets, the gRPC server that exposes
// ports implementations, and the mapping of ports error classes to wire
// codes and back.
package protocol

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// Version is the newest plugin protocol version: version 1 is the
// regroup.plugin.v1.Algorithms service.
const Version = 1

// PluginName is the name the algorithms service is dispensed under.
const PluginName = "algorithms"

// MaxMessageSize bounds one request or response (a Welcome with a large
// ratchet tree runs to megabytes). The host lowers the limit of each reply
// to what the request can yield.
const MaxMessageSize = 64 << 20

// MaxHeaderListSize bounds the headers and trailers the host accepts on one
// call; a plugin's error status travels in them.
const MaxHeaderListSize = 64 << 10

// Handshake is the go-plugin handshake. The cookie only stops a user from
// running a plugin binary by hand; it is not a security measure.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  Version,
	MagicCookieKey:   "REGROUP_ALGORITHM_PLUGIN",
	MagicCookieValue: "5b0e2c6f4d1a8e37-welcome-wrappers-and-pointee-aeads",
}

// GRPCPlugin is the go-plugin glue for the Algorithms service. On the plugin
// side Impl is set; on the host side it is nil and GRPCClient returns a
// pluginpb.AlgorithmsClient.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl pluginpb.AlgorithmsServer
}

// GRPCServer registers the Algorithms service.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginpb.RegisterAlgorithmsServer(s, p.Impl)
	return nil
}

// GRPCClient returns a pluginpb.AlgorithmsClient on conn.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return pluginpb.NewAlgorithmsClient(conn), nil
}

// PluginSets returns the versioned plugin sets, serving server on the
// plugin side (nil on the host side). A later protocol version adds an entry
// and keeps version 1, so a newer host still loads older plugins.
func PluginSets(server pluginpb.AlgorithmsServer) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		1: {PluginName: &GRPCPlugin{Impl: server}},
	}
}

// NewGRPCServer is the plugin side's gRPC server factory, raising the
// message size limit to MaxMessageSize.
func NewGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize))...)
}

// DialOptions are the host side's gRPC options: messages up to
// MaxMessageSize (each call may lower its receive limit), headers and
// trailers up to MaxHeaderListSize.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
		grpc.WithMaxHeaderListSize(MaxHeaderListSize),
	}
}
