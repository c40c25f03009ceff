package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// Webhook endpoint statuses, as stored.
const (
	// WebhookEnabled endpoints receive deliveries.
	WebhookEnabled = "enabled"
	// WebhookDisabled endpoints receive nothing: their deliveries, those of the events
	// written meanwhile included, are held until the endpoint is enabled again. A receiver
	// answering 410 Gone disables its endpoint.
	WebhookDisabled = "disabled"
)

// WebhookEndpoint is a URL registered to receive events of some kinds. Secret and
// PreviousSecret sign deliveries; they are shown once (at registration or rotation) and never
// again, so no view may include them.
type WebhookEndpoint struct {
	ID                      string `gorm:"column:id;primaryKey"` // whe_…
	Account                 string
	URL                     string `gorm:"column:url"`
	Description             *string
	EventTypes              []string `gorm:"column:event_types;serializer:json"`
	Status                  string
	Secret                  string  `json:"-"` // internal after creation
	PreviousSecret          *string `json:"-"` // internal
	PreviousSecretExpiresAt *time.Time
	CreatedAt               time.Time
	UpdatedAt               time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (WebhookEndpoint) TableName() string { return "webhook_endpoints" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (w *WebhookEndpoint) BeforeSave(*gorm.DB) error {
	w.normalize()
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (w *WebhookEndpoint) AfterFind(*gorm.DB) error {
	w.normalize()
	return nil
}

func (w *WebhookEndpoint) normalize() {
	normalizeTime(&w.CreatedAt)
	normalizeTime(&w.UpdatedAt)
	normalizeTimePtr(&w.PreviousSecretExpiresAt)
}

// Keyset is the endpoint's position in a list ordered by its time, for cursors.
func (w WebhookEndpoint) Keyset() Keyset { return timeKeyset(w.CreatedAt, w.ID) }

// CreateWebhookEndpoint inserts an endpoint and returns it as stored. ErrDuplicate when the id exists.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, w WebhookEndpoint) (WebhookEndpoint, error) {
	if err := s.conn(ctx).Create(&w).Error; err != nil {
		return WebhookEndpoint{}, interpretError(err)
	}
	return w, nil
}

// WebhookEndpointByID returns an endpoint of the account, or ErrNotFound (also when it
// belongs to another account).
func (s *Store) WebhookEndpointByID(ctx context.Context, account, id string) (WebhookEndpoint, error) {
	var w WebhookEndpoint
	if err := s.conn(ctx).Where("id = ? AND account = ?", id, account).Take(&w).Error; err != nil {
		return WebhookEndpoint{}, interpretError(err)
	}
	return w, nil
}

// ListWebhookEndpoints returns one page of the account's endpoints, newest first (or oldest
// first, p.OldestFirst).
func (s *Store) ListWebhookEndpoints(ctx context.Context, account string, p PageParams) (Page[WebhookEndpoint], error) {
	base := func() *gorm.DB {
		return s.model(ctx, &WebhookEndpoint{}).Where("webhook_endpoints.account = ?", account)
	}
	return byTime[WebhookEndpoint](base, "webhook_endpoints.created_at", "webhook_endpoints.id", p)
}

// DeleteWebhookEndpoint removes an endpoint of the account with its deliveries and their
// attempt log. ErrNotFound when there is none (already deleted, or another account's).
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, account, id string) error {
	return changedRows(resultOf(s.conn(ctx).Where("id = ? AND account = ?", id, account).Delete(&WebhookEndpoint{})), ErrNotFound)
}

// WebhookEndpointChange is what UpdateWebhookEndpoint changes: nil members stay as they are.
type WebhookEndpointChange struct {
	URL         *string
	EventTypes  []string
	Description *string // "" removes it
	Status      *string
	Now         time.Time
}

// UpdateWebhookEndpoint changes an endpoint of the account and returns it as stored; the
// secrets stay. Enabling a disabled endpoint makes the deliveries its claims held meanwhile due
// at once. ErrNotFound when the account has no such endpoint.
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, account, id string, c WebhookEndpointChange) (WebhookEndpoint, error) {
	var w WebhookEndpoint
	err := s.WithTx(ctx, func(tx *Store) error {
		var err error
		if w, err = tx.WebhookEndpointByID(ctx, account, id); err != nil {
			return err
		}
		if c.URL != nil {
			w.URL = *c.URL
		}
		if c.EventTypes != nil {
			w.EventTypes = c.EventTypes
		}
		if c.Description != nil {
			w.Description = c.Description
			if *c.Description == "" {
				w.Description = nil
			}
		}
		enabling := c.Status != nil && *c.Status == WebhookEnabled && w.Status != WebhookEnabled
		if c.Status != nil {
			w.Status = *c.Status
		}
		w.UpdatedAt = c.Now
		err = tx.conn(ctx).Select("url", "event_types", "description", "status", "updated_at").
			Where("account = ?", account).Updates(&w).Error
		if err != nil || !enabling {
			return interpretError(err)
		}
		// The deliveries held while it was disabled are due at once.
		return interpretError(tx.conn(ctx).Model(&webhookDelivery{}).
			Where("endpoint_id = ? AND status = ? AND due_at = ?", id, deliveryPending, heldUntilEnabled).
			Update("due_at", floorMicro(c.Now)).Error)
	})
	return w, err
}

// RotateWebhookSecretParams replaces an endpoint's signing secret.
type RotateWebhookSecretParams struct {
	Account   string
	ID        string
	NewSecret string
	// PreviousExpiresAt is when the replaced secret stops signing. At or before Now, the
	// replaced secret is dropped at once.
	PreviousExpiresAt time.Time
	Now               time.Time
}

// RotateWebhookSecret makes NewSecret the endpoint's secret and keeps the replaced one as the
// previous secret until PreviousExpiresAt. A secret still in an earlier grace window is
// dropped: at most two secrets sign at any time. One conditional UPDATE, whose right-hand
// sides see the row as it was, so concurrent rotations cannot interleave. ErrNotFound when the
// account has no such endpoint.
func (s *Store) RotateWebhookSecret(ctx context.Context, p RotateWebhookSecretParams) (WebhookEndpoint, error) {
	now := floorMicro(p.Now)
	expires := floorMicro(p.PreviousExpiresAt)
	updates := map[string]any{
		"secret":                     p.NewSecret,
		"previous_secret":            gorm.Expr("secret"),
		"previous_secret_expires_at": expires,
		"updated_at":                 now,
	}
	if !expires.After(now) {
		updates["previous_secret"] = nil
		updates["previous_secret_expires_at"] = nil
	}
	var out WebhookEndpoint
	err := s.WithTx(ctx, func(tx *Store) error {
		err := changedRows(resultOf(tx.conn(ctx).Model(&WebhookEndpoint{}).Where("id = ? AND account = ?", p.ID, p.Account).Updates(updates)), ErrNotFound)
		if err != nil {
			return err
		}
		out, err = tx.WebhookEndpointByID(ctx, p.Account, p.ID)
		return err
	})
	return out, err
}

// WebhookAttempt is one entry of an endpoint's deliveries log: one attempt to deliver one event.
type WebhookAttempt struct {
	ID             string `gorm:"column:id;primaryKey"`
	DeliveryID     int64
	EndpointID     string
	EventID        string
	EventType      string
	Attempt        int
	Status         string // succeeded, failed, pending (another attempt follows)
	ResponseStatus *int
	LatencyMs      *int64
	Error          *string
	AttemptedAt    time.Time
	NextAttemptAt  *time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (WebhookAttempt) TableName() string { return "webhook_attempts" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (a *WebhookAttempt) BeforeSave(*gorm.DB) error {
	normalizeTime(&a.AttemptedAt)
	normalizeTimePtr(&a.NextAttemptAt)
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (a *WebhookAttempt) AfterFind(*gorm.DB) error {
	normalizeTime(&a.AttemptedAt)
	normalizeTimePtr(&a.NextAttemptAt)
	return nil
}

// Keyset is the attempt's position in a list ordered by its time, for cursors.
func (a WebhookAttempt) Keyset() Keyset { return timeKeyset(a.AttemptedAt, a.ID) }

// ListWebhookAttempts returns one page of an endpoint's attempt log, newest first (or oldest
// first, p.OldestFirst).
func (s *Store) ListWebhookAttempts(ctx context.Context, endpointID string, p PageParams) (Page[WebhookAttempt], error) {
	base := func() *gorm.DB {
		return s.model(ctx, &WebhookAttempt{}).Where("webhook_attempts.endpoint_id = ?", endpointID)
	}
	return byTime[WebhookAttempt](base, "webhook_attempts.attempted_at", "webhook_attempts.id", p)
}
