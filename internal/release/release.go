//go:build !race && (amd64 || arm64)

package release

// Store stores v at *addr with release ordering and nothing more:
// every store before it (the cells of a message) is visible to a reader
// that sees v. On amd64 that is a plain MOV (the processor keeps stores
// in order), on arm64 an STLR. sync/atomic's Store is a full barrier
// (XCHG on amd64): it stalls the producer until the line holding the word,
// which the consumer keeps polling, has come back exclusive, about a
// hundred nanoseconds per message between cores. Being an assembly
// function, the call is also a barrier for the compiler. Race-detector
// builds use sync/atomic instead (race.go), so that the detector
// sees the synchronisation.
//
//go:noescape
func Store(addr *uint64, v uint64)
