// Package archtest holds no code: its tests check that every package of
// the library's and the daemon's modules is placed in a layer and imports
// only what its layer may, that the deny rules of docs/ARCHITECTURE.md
// hold, that the package map there names every package, that functions
// and files of every package stay within their bounds (or are listed with
// a reason), and that no suite lists the algorithms by hand.
package archtest
