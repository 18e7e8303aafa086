// Package release stores a word with release ordering and nothing more,
// the cheapest way for one goroutine (or process) to publish what it
// wrote before to another that reads the word with sync/atomic's Load.
package release
