// Package invariants switches on expensive self-checks of the simulator when
// built with `-tags invariants` (go test -tags invariants ./internal/sim/...).
package invariants
