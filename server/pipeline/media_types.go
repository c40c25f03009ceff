package pipeline

import (
	"context"
	"mime"
	"slices"
	"strconv"
	"strings"
)

// Content negotiation: which of an operation's media types the Accept header admits, and the
// one the answer is written in.

// acceptable reports whether any media range of the Accept header admits one of produces.
// No Accept header admits everything.
func acceptable(accept []string, produces []string) bool {
	if len(accept) == 0 || len(produces) == 0 {
		return true
	}
	for _, header := range accept {
		for _, part := range strings.Split(header, ",") {
			mediaRange, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			if q, ok := params["q"]; ok && strings.Trim(q, "0.") == "" {
				continue // q=0 excludes the range
			}
			for _, produced := range produces {
				if mediaMatches(mediaRange, produced) {
					return true
				}
			}
		}
	}
	return false
}

// preferredMediaType is the one of produces that accept ranks highest (by q, then by how
// specifically a range names it); on a tie, or with no Accept, application/json.
func preferredMediaType(accept []string, produces []string) string {
	candidates := make([]string, 0, len(produces))
	if slices.Contains(produces, "application/json") {
		candidates = append(candidates, "application/json")
	}
	for _, p := range produces {
		if p != "application/json" {
			candidates = append(candidates, p)
		}
	}
	best, bestQ, bestSpecific := candidates[0], -1.0, -1
	for _, produced := range candidates {
		q, specific := 0.0, -1
		if len(accept) == 0 {
			q, specific = 1, 0
		}
		for _, header := range accept {
			for _, part := range strings.Split(header, ",") {
				mediaRange, params, err := mime.ParseMediaType(strings.TrimSpace(part))
				if err != nil || !mediaMatches(mediaRange, produced) {
					continue
				}
				rank := strings.Count(mediaRange, "*") // 0 exact, 1 type/*, 2 */*
				rangeQ := 1.0
				if v, ok := params["q"]; ok {
					if f, err := strconv.ParseFloat(v, 64); err == nil {
						rangeQ = f
					}
				}
				if specific == -1 || 2-rank > specific {
					q, specific = rangeQ, 2-rank
				}
			}
		}
		if q > bestQ || (q == bestQ && specific > bestSpecific) {
			best, bestQ, bestSpecific = produced, q, specific
		}
	}
	return best
}

type mediaTypeKey struct{}

func withMediaType(ctx context.Context, mediaType string) context.Context {
	return context.WithValue(ctx, mediaTypeKey{}, mediaType)
}

// MediaType is the media type the gate chose for the answer, or "" when the operation
// has one.
func MediaType(ctx context.Context) string {
	t, _ := ctx.Value(mediaTypeKey{}).(string)
	return t
}

func mediaMatches(mediaRange, mediaType string) bool {
	if mediaRange == "*/*" || mediaRange == mediaType {
		return true
	}
	if major, ok := strings.CutSuffix(mediaRange, "/*"); ok {
		return strings.HasPrefix(mediaType, major+"/")
	}
	return false
}
