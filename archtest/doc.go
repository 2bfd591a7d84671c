// Package archtest holds the test that enforces ARCHITECTURE.md's house
// map: it reads the map's floors and rules and checks every import of
// the module with go list. It has no code of its own.
package archtest
