//go:build race || !(amd64 || arm64)

package release

import "sync/atomic"

// Store is sync/atomic's store where release.go's assembly is not
// used (race-detector builds, other architectures).
func Store(addr *uint64, v uint64) { atomic.StoreUint64(addr, v) }
