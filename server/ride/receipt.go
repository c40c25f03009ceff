package ride

import (
	"math"
	"math/big"
)

// LineItemKind names what a line of a receipt charges for.
type LineItemKind string

// The kinds of receipt lines, in the order a receipt lists them.
const (
	// LineBaseFare is the city's flat charge per trip.
	LineBaseFare LineItemKind = "base_fare"
	// LineDistance is the per-kilometre charge.
	LineDistance LineItemKind = "distance"
	// LineTime is the per-minute charge.
	LineTime LineItemKind = "time"
)

// LineItem is one line of a receipt, in minor units of the receipt's currency.
type LineItem struct {
	Kind   LineItemKind
	Amount int64
}

// ReceiptLines splits amount, the fare actually charged, into base fare, distance and time
// lines in proportion to what the city's rates charge for each part of the trip's route (the
// same road distance and duration QuoteFare prices). The charged fare is not the rates'
// point price (it is the upfront upper bound, or a minimum fare), so the lines show how the
// rates weigh the parts, scaled to the amount paid.
//
// The lines always add up exactly to amount: each gets the floor of its share, and the minor
// units left over go one each to the lines with the largest remainders, ties to the earlier
// line (largest remainder method). When the rates charge nothing at all, the whole amount is
// the base fare. amount must not be negative.
func ReceiptLines(amount int64, origin, destination Point, r Rates) []LineItem {
	meters := math.Round(HaversineMeters(origin, destination) * roadFactor)
	return ReceiptLinesForDistance(amount, int64(meters), r)
}

// ReceiptLinesForDistance is ReceiptLines for a known road distance, as QuoteDistance is for
// QuoteFare, so the split can be checked by hand.
func ReceiptLinesForDistance(amount, meters int64, r Rates) []LineItem {
	meters = max(meters, 0)
	seconds := mulDivHalfUp(meters, 3600, averageSpeedMetersPerHour)
	// The same scale as QuoteDistance: minor units × metersPerKm × secondsPerMinute. The ride
	// type's multiplier scales every part alike, so it cannot change the proportions.
	weights := []int64{
		r.BaseFare * metersPerKm * secondsPerMinute,
		r.PerKm * meters * secondsPerMinute,
		r.PerMinute * seconds * metersPerKm,
	}
	kinds := []LineItemKind{LineBaseFare, LineDistance, LineTime}
	shares := SplitProportionally(amount, weights)
	lines := make([]LineItem, len(kinds))
	for i, k := range kinds {
		lines[i] = LineItem{Kind: k, Amount: shares[i]}
	}
	return lines
}

// SplitProportionally divides amount (≥ 0) into len(weights) whole parts proportional to the
// non-negative weights, summing exactly to amount, by the largest remainder method with ties
// to the earlier part. When every weight is zero, the first part takes everything. Products
// are computed in arbitrary precision, so no amount or weight overflows.
func SplitProportionally(amount int64, weights []int64) []int64 {
	parts := make([]int64, len(weights))
	if len(weights) == 0 {
		return parts
	}
	total := new(big.Int)
	for _, w := range weights {
		total.Add(total, big.NewInt(max(w, 0)))
	}
	if total.Sign() == 0 {
		parts[0] = amount
		return parts
	}
	remainders := make([]*big.Int, len(weights))
	left := amount
	for i, w := range weights {
		q, rem := new(big.Int).QuoRem(
			new(big.Int).Mul(big.NewInt(amount), big.NewInt(max(w, 0))), total, new(big.Int))
		parts[i] = q.Int64()
		remainders[i] = rem
		left -= parts[i]
	}
	// left < len(weights): each floor lost less than one unit.
	for ; left > 0; left-- {
		best := -1
		for i, rem := range remainders {
			if rem.Sign() >= 0 && (best < 0 || rem.Cmp(remainders[best]) > 0) {
				best = i
			}
		}
		parts[best]++
		remainders[best].SetInt64(-1) // one extra unit per part at most
	}
	return parts
}
