// Package lint holds only tests: they check the project's conventions
// (wrapped error causes, typed atomics, package-prefixed panics) over the
// whole source tree.
package lint
