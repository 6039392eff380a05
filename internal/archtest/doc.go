// Package archtest holds no code: its test checks that the module's
// imports point the way docs/ARCHITECTURE.md says, and that the package
// map there names every package of the module.
package archtest
