package model

// Tier is an isolation tier. Tiers are ranked by escape resistance only; a
// higher rank says nothing about speed, cost or compatibility.
type Tier string

const (
	TierUnknown   Tier = "UNKNOWN"
	TierContainer Tier = "CONTAINER"
	TierGVisor    Tier = "GVISOR"
	TierMicroVM   Tier = "MICROVM"
)

// Tiers lists every tier in rank order, lowest first.
var Tiers = []Tier{TierUnknown, TierContainer, TierGVisor, TierMicroVM}

// Rank returns the tier's explicit rank (UNKNOWN is 0) and false for a value
// that is not a tier.
func (t Tier) Rank() (int, bool) {
	for i, known := range Tiers {
		if t == known {
			return i, true
		}
	}
	return -1, false
}

// Satisfies reports whether a sandbox on tier t meets a requirement. An
// UNKNOWN tier satisfies no requirement, and UNKNOWN is never a valid
// requirement, so both sides must be known tiers.
func (t Tier) Satisfies(required Tier) bool {
	have, ok := t.Rank()
	if !ok || t == TierUnknown {
		return false
	}
	want, ok := required.Rank()
	if !ok || required == TierUnknown {
		return false
	}
	return have >= want
}
