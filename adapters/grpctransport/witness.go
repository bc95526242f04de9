package grpctransport

import (
	"context"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

var _ ports.Witness = (*Client)(nil)

// Report implements [ports.Witness] with one Report call. The service
// keeps an installation's first report, so a report whose answer was
// lost is sent again on the next replica like a read.
func (c *Client) Report(ctx context.Context, r ports.Report) error {
	req := &deliverypb.ReportRequest{GroupId: r.GroupID, CommitSequenceId: r.CommitSeq,
		Verdict: backendpb.AcceptanceReport_Verdict(r.Verdict), Reason: r.Reason}
	return c.call(ctx, "report", true, func(ep *endpoint) error {
		_, err := ep.api.Report(ctx, req)
		return err
	})
}

// Lift implements [ports.Witness] with one Lift call.
func (c *Client) Lift(ctx context.Context, l ports.Lift) error {
	req := &deliverypb.LiftRequest{GroupId: l.GroupID, InboxId: l.InboxID, InstallationKey: l.InstallationKey}
	return c.call(ctx, "lift", false, func(ep *endpoint) error {
		_, err := ep.api.Lift(ctx, req)
		return err
	})
}

// witnessOf returns the service's inbound witness side, or an error
// wrapping [ports.ErrInvalidArgument] when it has none.
func (s *Server) witnessOf() (ports.DeliveryWitness, error) {
	w, ok := s.svc.(ports.DeliveryWitness)
	if !ok {
		return nil, errNoWitness
	}
	return w, nil
}

// Report implements deliverypb.DeliveryServer: one token, then the
// service's [ports.DeliveryWitness.Report] for the connection's caller.
func (s *Server) Report(ctx context.Context, req *deliverypb.ReportRequest) (*deliverypb.ReportResponse, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.charge(c, 1); err != nil {
		s.tarpit(ctx, err)
		return nil, s.status(ctx, err)
	}
	w, err := s.witnessOf()
	if err == nil {
		err = w.Report(ctx, c.getCaller(), ports.Report{GroupID: req.GetGroupId(), CommitSeq: req.GetCommitSequenceId(),
			Verdict: ports.Verdict(req.GetVerdict()), Reason: req.GetReason()})
	}
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &deliverypb.ReportResponse{}, nil
}

// Lift implements deliverypb.DeliveryServer like Report.
func (s *Server) Lift(ctx context.Context, req *deliverypb.LiftRequest) (*deliverypb.LiftResponse, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.charge(c, 1); err != nil {
		s.tarpit(ctx, err)
		return nil, s.status(ctx, err)
	}
	w, err := s.witnessOf()
	if err == nil {
		err = w.Lift(ctx, c.getCaller(), ports.Lift{GroupID: req.GetGroupId(), InboxID: req.GetInboxId(), InstallationKey: req.GetInstallationKey()})
	}
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &deliverypb.LiftResponse{}, nil
}
