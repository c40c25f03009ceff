package webhooks

import (
	"encoding/json"
	"time"
)

// Event is the body of every delivery and of each item of GET /v1/events: what happened
// (Type), to what (inside Data), and when. ID is unique per event and the same on every
// retry, so a receiver deduplicates on it. Data's members depend on Type (see the Event
// schemas of openapi/ride.yaml); members may be added within v1, never removed.
type Event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

// Body is the exact JSON the service sends for the event: compact, created_at in UTC.
func (e Event) Body() ([]byte, error) {
	e.CreatedAt = e.CreatedAt.UTC()
	return json.Marshal(e)
}
