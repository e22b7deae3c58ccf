// Package hrw is rendezvous (highest random weight) hashing: every node
// scores every key and the key belongs to the node with the highest score;
// the rest of the ranking is the failover order. Adding or removing one of N
// nodes moves only the keys that node wins or held, about 1/N of them
// (modulo hashing moves almost all).
package hrw

import (
	"math"
	"slices"
)

// Node is one member of the ranking.
type Node struct {
	// Name identifies the node; it must be unique and stable across
	// restarts, since it is what keys are hashed against.
	Name string
	// Weight scales the node's share of keys (a node with twice the disk
	// gets twice the files). Zero or negative means 1.
	Weight float64
}

// Hash64 is the 64-bit hash of s used for keys and node names (FNV-1a
// finished with a 64-bit mixer, so that similar names spread well).
func Hash64(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return mix(h)
}

// mix is the finaliser of SplitMix64, a bijection with full avalanche.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Score is n's score for the key whose Hash64 is key; the highest score
// wins. It is a pure function of (n, key), so every node that knows the same
// member list computes the same owner. It is weighted rendezvous hashing
// (Schindelhauer & Schomaker): -w / ln(u) with u uniform in (0, 1) from
// hashing the pair, which keeps each node's share of keys proportional to
// its weight; with equal weights the order is that of u.
func Score(n Node, key uint64) float64 {
	w := n.Weight
	if w <= 0 {
		w = 1
	}
	u := (float64(mix(Hash64(n.Name)^key)>>11) + 0.5) / (1 << 53) // in (0, 1)
	return -w / math.Log(u)
}

// Rank returns nodes sorted by descending score for key (ties by name), so
// Rank(...)[0] owns key and the rest is the failover order. It does not
// modify nodes.
func Rank(nodes []Node, key string) []Node {
	h := Hash64(key)
	type scored struct {
		n Node
		s float64
	}
	sc := make([]scored, len(nodes))
	for i, n := range nodes {
		sc[i] = scored{n, Score(n, h)}
	}
	slices.SortFunc(sc, func(a, b scored) int {
		switch {
		case a.s > b.s:
			return -1
		case a.s < b.s:
			return 1
		}
		if a.n.Name < b.n.Name {
			return -1
		}
		if a.n.Name > b.n.Name {
			return 1
		}
		return 0
	})
	out := make([]Node, len(sc))
	for i, s := range sc {
		out[i] = s.n
	}
	return out
}

// Owner returns the node with the highest score for key, or false if nodes
// is empty. It allocates nothing.
func Owner(nodes []Node, key string) (Node, bool) {
	if len(nodes) == 0 {
		return Node{}, false
	}
	h := Hash64(key)
	best, bestScore := 0, Score(nodes[0], h)
	for i := 1; i < len(nodes); i++ {
		s := Score(nodes[i], h)
		if s > bestScore || s == bestScore && nodes[i].Name < nodes[best].Name {
			best, bestScore = i, s
		}
	}
	return nodes[best], true
}
