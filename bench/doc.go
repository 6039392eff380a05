// Package bench runs Floodgate side by side with peer rate limiters on the
// same workloads. It is a module of its own so that library users never
// download the peers. Run it with `make bench`; docs/BENCHMARKS.md records
// the figures.
package bench
