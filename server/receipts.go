package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// ListReceipts lists a trip's receipts, newest first unless sorted otherwise, to the trip's
// rider or an admin. A rider
// naming a trip that is not theirs, or that does not exist, is refused alike (403), so the
// answer never tells whether another rider's trip exists; for an admin an unknown trip is an
// empty list, as an unknown filter value is on every list.
func (s *Server) ListReceipts(ctx context.Context, req gen.ListReceiptsRequestObject) (gen.ListReceiptsResponseObject, error) {
	caller := auth.PrincipalFrom(ctx)
	p := req.Params
	if !caller.IsAdmin() {
		ok, err := s.ridersTrip(ctx, caller, p.TripId)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, app.Forbidden("Only the trip's rider or an admin may list its receipts.")
		}
	}
	if caller.IsAdmin() {
		// Another account's trip is an unknown one: an empty list.
		ok, err := s.accountsTrip(ctx, caller, p.TripId)
		if err != nil {
			return nil, err
		}
		if !ok {
			return gen.ListReceipts200JSONResponse{Body: gen.ReceiptList{Data: []gen.Receipt{}}}, nil
		}
	}
	order, err := parseTimeSort(p.Sort)
	if err != nil {
		return nil, err
	}
	query := callerQuery(caller, "/v1/receipts", p.TripId, order.spec)
	params := store.ReceiptListParams{TripID: p.TripId, Limit: pageLimit(p.Limit), OldestFirst: order.oldestFirst}
	params.After, params.Before, err = s.keysetFrom(p.Cursor, query, 1)
	if err != nil {
		return nil, err
	}
	page, err := s.storeFor(ctx).ListReceipts(ctx, params)
	if err != nil {
		return nil, err
	}
	list := gen.ReceiptList{Data: make([]gen.Receipt, len(page.Receipts))}
	for i, r := range page.Receipts {
		if list.Data[i], err = receiptView(r); err != nil {
			return nil, err
		}
	}
	n := len(page.Receipts)
	list.Pagination = s.pagination(query, n, page.MoreAfter, page.MoreBefore,
		func() store.Keyset { return page.Receipts[0].Keyset() },
		func() store.Keyset { return page.Receipts[n-1].Keyset() })
	return gen.ListReceipts200JSONResponse{Body: list}, nil
}

// ridersTrip reports whether the caller is a rider and tripID names one of their trips.
func (s *Server) ridersTrip(ctx context.Context, caller auth.Principal, tripID string) (bool, error) {
	if caller.Role != auth.RoleRider {
		return false, nil
	}
	trip, ok, err := s.tripOfAccount(ctx, caller.Account, tripID)
	return ok && trip.RiderID == caller.Subject, err
}

// accountsTrip reports whether tripID names a trip of the caller's account.
func (s *Server) accountsTrip(ctx context.Context, caller auth.Principal, tripID string) (bool, error) {
	_, ok, err := s.tripOfAccount(ctx, caller.Account, tripID)
	return ok, err
}

// tripOfAccount reads a trip of the account; ok is false when there is none by that id there.
func (s *Server) tripOfAccount(ctx context.Context, account, tripID string) (store.Trip, bool, error) {
	if !ride.ValidID(ride.PrefixTrip, tripID) {
		return store.Trip{}, false, nil
	}
	trip, err := s.storeFor(ctx).TripWithin(ctx, tripID, store.TripReach{Account: account})
	if errors.Is(err, store.ErrNotFound) {
		return store.Trip{}, false, nil
	} else if err != nil {
		return store.Trip{}, false, err
	}
	return trip, true, nil
}

// receiptView is the public projection of a receipt.
func receiptView(r store.Receipt) (gen.Receipt, error) {
	var items []gen.ReceiptLineItem
	if err := json.Unmarshal([]byte(r.LineItems), &items); err != nil {
		return gen.Receipt{}, fmt.Errorf("receipt %s: line items: %w", r.ID, err)
	}
	return gen.Receipt{
		Id: r.ID, TripId: r.TripID, PaymentId: r.PaymentID, Amount: r.Amount, Currency: r.Currency,
		LineItems: items, IssuedAt: r.IssuedAt.UTC(),
	}, nil
}
